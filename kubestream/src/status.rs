//! How a session ends (pure): [`SessionStatus`] and the kubelet's `metav1.Status` JSON that
//! carries it on the error channel, exactly as kubectl reads it.
//!
//! The kubelet (`ServeExec`) writes `{"metadata":{},"status":"Success"}` for exit 0, a
//! `Failure` with reason `NonZeroExitCode` and a cause `{"reason":"ExitCode","message":"N"}`
//! for exit N — kubectl then prints `command terminated with exit code N` and exits N
//! (client-go `errorDecoderV4`, which parses the cause as a `uint8`) — and any other `Failure`
//! (e.g. `InternalError`, 500) for a command that could not run: kubectl prints its message and
//! exits 1. The simulator, the testkit and the hub all encode through [`SessionStatus::to_json`];
//! the hub decodes an agent's exit with [`SessionStatus::from_json`], which validates it, and
//! re-encodes it, so nothing an agent sends reaches kubectl raw.

use std::num::NonZeroU8;

use serde::{Deserialize, Serialize};

#[cfg(test)]
mod tests;

/// The largest exit `Status` accepted from an agent (`TunnelExit`, design note §3.1).
pub const MAX_STATUS_JSON: usize = 16 * 1024;
/// The longest `reason` accepted: Kubernetes' reasons are short CamelCase words.
pub const MAX_REASON_LEN: usize = 64;
/// `reason` of a non-zero exit (`remotecommand.NonZeroExitCodeReason`).
pub const NON_ZERO_EXIT_CODE: &str = "NonZeroExitCode";
/// The cause type carrying the exit code (`remotecommand.ExitCodeCauseType`).
pub const EXIT_CODE_CAUSE: &str = "ExitCode";

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStatus {
    /// The command exited 0 (or the session ended normally).
    Success,
    /// The command exited with this code (1–255); kubectl exits with it too.
    ExitCode(NonZeroU8),
    /// The session failed otherwise: kubectl prints `message` and exits 1.
    Failure {
        /// Kubernetes' `reason` (`InternalError`, `Forbidden`, …); may be empty.
        reason: String,
        /// What went wrong, in words for the user.
        message: String,
        /// The HTTP-style code, when there is one (500 for `InternalError`).
        code: Option<u16>,
    },
}

/// Why an exit `Status` was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Larger than [`MAX_STATUS_JSON`].
    #[error("exit status of {len} bytes is over the limit of {MAX_STATUS_JSON}")]
    TooLarge {
        /// Its length.
        len: usize,
    },
    /// Not a `metav1.Status` in JSON.
    #[error("exit status is not a Status object: {source}")]
    Json {
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// `status` is neither `Success` nor `Failure`.
    #[error("exit status has status {status:?}; expected Success or Failure")]
    UnknownStatus {
        /// The value found (cut to [`MAX_REASON_LEN`]).
        status: String,
    },
    /// `NonZeroExitCode` without an `ExitCode` cause.
    #[error("a NonZeroExitCode status has no ExitCode cause")]
    NoExitCode,
    /// An `ExitCode` cause that is not 1–255 in decimal.
    #[error("exit code {value:?} is not a number from 1 to 255")]
    BadExitCode {
        /// The cause's message (cut to [`MAX_REASON_LEN`]).
        value: String,
    },
    /// A `reason` that is not a short ASCII word.
    #[error(
        "reason {reason:?} is not a Kubernetes reason (ASCII letters and digits, at most {MAX_REASON_LEN})"
    )]
    BadReason {
        /// The reason (cut to [`MAX_REASON_LEN`]).
        reason: String,
    },
    /// A `code` outside 100–599.
    #[error("status code {code} is not an HTTP status")]
    BadCode {
        /// The code.
        code: i64,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `metav1.Status` in Go's field order, with only the fields the error channel uses.
#[derive(Serialize, Deserialize, Default)]
struct StatusJson {
    #[serde(default)]
    metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    details: Option<DetailsJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    code: Option<i64>,
}

#[derive(Serialize, Deserialize, Default)]
struct DetailsJson {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    causes: Vec<CauseJson>,
}

#[derive(Serialize, Deserialize)]
struct CauseJson {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    reason: String,
    #[serde(default)]
    message: String,
}

impl SessionStatus {
    /// The status of a process that exited with `code` (0 is [`SessionStatus::Success`]).
    pub fn exited(code: u8) -> SessionStatus {
        NonZeroU8::new(code).map_or(SessionStatus::Success, SessionStatus::ExitCode)
    }

    /// A `Failure` with reason `InternalError` and code 500, worded as
    /// `apierrors.NewInternalError` (`Internal error occurred: …`).
    pub fn internal_error(detail: &str) -> SessionStatus {
        SessionStatus::Failure {
            reason: "InternalError".to_owned(),
            message: format!("Internal error occurred: {detail}"),
            code: Some(500),
        }
    }

    /// What kubectl exits with when it reads this status.
    pub fn kubectl_exit_code(&self) -> u8 {
        match self {
            SessionStatus::Success => 0,
            SessionStatus::ExitCode(n) => n.get(),
            SessionStatus::Failure { .. } => 1,
        }
    }

    /// The message kubectl prints (empty for success).
    pub fn message(&self) -> String {
        match self {
            SessionStatus::Success => String::new(),
            SessionStatus::ExitCode(n) => format!("command terminated with exit code {n}"),
            SessionStatus::Failure { message, .. } => message.clone(),
        }
    }

    /// The kubelet's JSON for this status, as written on the error channel.
    pub fn to_json(&self) -> Vec<u8> {
        let json = match self {
            SessionStatus::Success => StatusJson {
                status: "Success".to_owned(),
                ..StatusJson::default()
            },
            SessionStatus::ExitCode(n) => StatusJson {
                status: "Failure".to_owned(),
                message: format!("command terminated with non-zero exit code: exit status {n}"),
                reason: NON_ZERO_EXIT_CODE.to_owned(),
                details: Some(DetailsJson {
                    causes: vec![CauseJson {
                        reason: EXIT_CODE_CAUSE.to_owned(),
                        message: n.to_string(),
                    }],
                }),
                ..StatusJson::default()
            },
            SessionStatus::Failure {
                reason,
                message,
                code,
            } => StatusJson {
                status: "Failure".to_owned(),
                message: message.clone(),
                reason: reason.clone(),
                code: code.map(i64::from),
                ..StatusJson::default()
            },
        };
        // Strings, maps and integers always serialize.
        serde_json::to_vec(&json).unwrap_or_default()
    }

    /// Reads and validates an exit `Status` (the hub's check of what an agent sends):
    /// bounded, a known `status`, an exit code kubectl can read, a short ASCII `reason`, an
    /// HTTP `code`. Control characters in the message (other than newline and tab) become
    /// U+FFFD, so a spoke cannot drive the user's terminal through kubectl's error line.
    pub fn from_json(bytes: &[u8]) -> Result<SessionStatus> {
        if bytes.len() > MAX_STATUS_JSON {
            return Err(Error::TooLarge { len: bytes.len() });
        }
        let json: StatusJson =
            serde_json::from_slice(bytes).map_err(|source| Error::Json { source })?;
        match json.status.as_str() {
            "Success" => Ok(SessionStatus::Success),
            "Failure" if json.reason == NON_ZERO_EXIT_CODE => exit_code(&json),
            "Failure" => failure(json),
            other => Err(Error::UnknownStatus { status: cut(other) }),
        }
    }
}

fn exit_code(json: &StatusJson) -> Result<SessionStatus> {
    let cause = json
        .details
        .as_ref()
        .and_then(|d| d.causes.iter().find(|c| c.reason == EXIT_CODE_CAUSE))
        .ok_or(Error::NoExitCode)?;
    let value = &cause.message;
    // Go's strconv.ParseUint(s, 10, 8): ASCII digits only, no sign.
    let code = if value.bytes().all(|b| b.is_ascii_digit()) {
        value.parse::<u8>().ok().and_then(NonZeroU8::new)
    } else {
        None
    };
    code.map(SessionStatus::ExitCode)
        .ok_or_else(|| Error::BadExitCode { value: cut(value) })
}

fn failure(json: StatusJson) -> Result<SessionStatus> {
    let reason = json.reason;
    if reason.len() > MAX_REASON_LEN || !reason.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(Error::BadReason {
            reason: cut(&reason),
        });
    }
    let code = match json.code {
        None | Some(0) => None,
        Some(c @ 100..=599) => u16::try_from(c).ok(),
        Some(code) => return Err(Error::BadCode { code }),
    };
    Ok(SessionStatus::Failure {
        reason,
        message: sanitize(&json.message),
        code,
    })
}

/// Replaces control characters other than `\n` and `\t` with U+FFFD.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                char::REPLACEMENT_CHARACTER
            } else {
                c
            }
        })
        .collect()
}

fn cut(s: &str) -> String {
    s.chars().take(MAX_REASON_LEN).collect()
}
