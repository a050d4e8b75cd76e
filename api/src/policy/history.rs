//! Compliance history of one policy template on one cluster: OCM's `details[].history`, newest
//! first and bounded. An event is recorded when the message changes, so a cluster that stays
//! compliant does not churn its status, and the current compliance always comes from the newest
//! evaluation — never from past events (an enforced policy repaired is Compliant at once).

use crate::v1::ComplianceHistoryEvent;
use prost_types::Timestamp;

/// The longest message an event keeps (bytes): a template error quoting a 500 KiB
/// objectDefinition, or a `fail` of 1 MiB, would otherwise make one cluster's report larger
/// than the bus carries, and its compliance would never reach the hub.
pub const MAX_MESSAGE: usize = 4096;

/// `message` cut to at most [`MAX_MESSAGE`] bytes on a character boundary, ending in `…`
/// when it was cut.
pub fn cut(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_MESSAGE {
        return message.into();
    }
    let mut end = MAX_MESSAGE - '…'.len_utf8();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end]).into()
}

/// Records `message` at `at` as the newest event, also when it repeats the newest: for events
/// that happened again (enforce repaired the same drift twice). Keeps at most `limit`.
pub fn push(
    history: &mut Vec<ComplianceHistoryEvent>,
    at: Timestamp,
    message: &str,
    event_name: &str,
    limit: usize,
) {
    history.insert(
        0,
        ComplianceHistoryEvent {
            last_timestamp: Some(at),
            message: cut(message).into_owned(),
            event_name: event_name.to_string(),
        },
    );
    history.truncate(limit.max(1));
}

/// Records `message` at `at` unless it is already the newest event; keeps at most `limit`
/// events, newest first. Returns whether the history changed.
pub fn record(
    history: &mut Vec<ComplianceHistoryEvent>,
    at: Timestamp,
    message: &str,
    event_name: &str,
    limit: usize,
) -> bool {
    if history.first().is_some_and(|e| e.message == cut(message)) {
        return false;
    }
    push(history, at, message, event_name, limit);
    true
}

/// Merges a history kept elsewhere (an agent's, reported after it was offline) into `into`:
/// the union, newest first, without duplicate events, bounded by `limit`.
pub fn merge(
    into: &mut Vec<ComplianceHistoryEvent>,
    other: &[ComplianceHistoryEvent],
    limit: usize,
) {
    let key = |e: &ComplianceHistoryEvent| {
        let t = e.last_timestamp.unwrap_or_default();
        (t.seconds, t.nanos)
    };
    for e in other {
        if !into
            .iter()
            .any(|x| key(x) == key(e) && x.message == e.message)
        {
            into.push(e.clone());
        }
    }
    into.sort_by_key(|e| std::cmp::Reverse(key(e)));
    into.truncate(limit.max(1));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp {
            seconds: s,
            nanos: 0,
        }
    }

    #[test]
    fn newest_first_bounded_and_only_on_change() {
        let mut h = Vec::new();
        assert!(record(&mut h, at(1), "NonCompliant; violation - a", "e", 3));
        assert!(!record(
            &mut h,
            at(2),
            "NonCompliant; violation - a",
            "e",
            3
        ));
        assert!(record(&mut h, at(3), "Compliant; notification - a", "e", 3));
        assert!(record(&mut h, at(4), "NonCompliant; violation - b", "e", 3));
        assert!(record(&mut h, at(5), "Compliant; notification - b", "e", 3));
        let times: Vec<i64> = h
            .iter()
            .map(|e| e.last_timestamp.unwrap().seconds)
            .collect();
        assert_eq!(times, [5, 4, 3]);
        assert_eq!(h[0].message, "Compliant; notification - b");
    }

    #[test]
    fn a_repeated_event_is_pushed_when_it_happened_again() {
        let mut h = Vec::new();
        record(
            &mut h,
            at(1),
            "Compliant; notification - a was created successfully",
            "e",
            3,
        );
        push(
            &mut h,
            at(2),
            "Compliant; notification - a was created successfully",
            "e",
            3,
        );
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].last_timestamp.unwrap().seconds, 2);
    }

    #[test]
    fn merging_an_offline_agents_history_keeps_order_without_duplicates() {
        let mut hub = Vec::new();
        record(&mut hub, at(1), "NonCompliant; violation - a", "e", 10);
        let mut agent = hub.clone();
        record(
            &mut agent,
            at(5),
            "Compliant; notification - a was created",
            "e",
            10,
        );
        record(
            &mut agent,
            at(7),
            "Compliant; notification - a found",
            "e",
            10,
        );
        merge(&mut hub, &agent, 10);
        let times: Vec<i64> = hub
            .iter()
            .map(|e| e.last_timestamp.unwrap().seconds)
            .collect();
        assert_eq!(times, [7, 5, 1]);
        merge(&mut hub, &agent, 2);
        assert_eq!(hub.len(), 2);
    }
}
