//! Feature gates: `--feature-gates Name=true,Other=false`, named and defaulted as OCM's work
//! agent's (`DefaultSpokeWorkFeatureGates`), so a Klusterlet's `workConfiguration.featureGates`
//! carries over.
//!
//! The gates live on the agent, as in OCM, because they change what the agent itself does
//! (how it types status feedback); different clusters may run with different gates.

use flotilla_api::feedback::{RAW_FEEDBACK_JSON_STRING, RawJson};

/// The gates the agent knows, each off by default (as in OCM, where they are alpha).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// `RawFeedbackJsonString`: feedback values that are not one integer, string or boolean
    /// (objects, lists, other numbers, several matches) are reported as JSON text (`JsonRaw`)
    /// instead of failing `StatusFeedbackSynced`.
    pub raw_feedback_json_string: bool,
}

impl FeatureGates {
    /// Names of the known gates, in the order error messages list them.
    pub const KNOWN: [&'static str; 1] = [RAW_FEEDBACK_JSON_STRING];

    /// Parses `--feature-gates` values (each a comma-separated `Name=true|false` list; later
    /// entries win), reporting every problem at once. Names are case-sensitive, as OCM's.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<Self, Vec<String>> {
        let mut gates = FeatureGates::default();
        let mut errors = Vec::new();
        let entries = values
            .iter()
            .flat_map(|v| v.as_ref().split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty());
        for entry in entries {
            let Some((name, value)) = entry.split_once('=') else {
                errors.push(format!(
                    "--feature-gates {entry:?}: expected NAME=true or NAME=false"
                ));
                continue;
            };
            let enabled = match value.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    errors.push(format!(
                        "--feature-gates {entry:?}: the value must be true or false"
                    ));
                    continue;
                }
            };
            match name.trim() {
                RAW_FEEDBACK_JSON_STRING => gates.raw_feedback_json_string = enabled,
                other => errors.push(format!(
                    "--feature-gates: unknown feature gate {other:?}; known gates: {}",
                    Self::KNOWN.join(", ")
                )),
            }
        }
        if errors.is_empty() {
            Ok(gates)
        } else {
            Err(errors)
        }
    }

    /// How feedback values are typed under these gates.
    pub fn raw_json(&self) -> RawJson {
        if self.raw_feedback_json_string {
            RawJson::Enabled
        } else {
            RawJson::Disabled
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_are_off_by_default_and_parse_like_kubernetes_feature_gates() {
        let none: [&str; 0] = [];
        assert_eq!(FeatureGates::parse(&none).unwrap(), FeatureGates::default());
        assert_eq!(FeatureGates::default().raw_json(), RawJson::Disabled);
        let on = FeatureGates::parse(&["RawFeedbackJsonString=true"]).unwrap();
        assert!(on.raw_feedback_json_string);
        assert_eq!(on.raw_json(), RawJson::Enabled);
        let later_wins =
            FeatureGates::parse(&["RawFeedbackJsonString=true", " RawFeedbackJsonString=False"])
                .unwrap();
        assert!(!later_wins.raw_feedback_json_string);
    }

    #[test]
    fn every_bad_gate_is_reported_at_once() {
        let errors = FeatureGates::parse(&[
            "Nope=true,RawFeedbackJsonString=yes",
            "rawfeedbackjsonstring",
        ])
        .unwrap_err();
        assert_eq!(
            errors,
            [
                "--feature-gates: unknown feature gate \"Nope\"; known gates: RawFeedbackJsonString",
                "--feature-gates \"RawFeedbackJsonString=yes\": the value must be true or false",
                "--feature-gates \"rawfeedbackjsonstring\": expected NAME=true or NAME=false",
            ]
        );
    }
}
