//! The standard NATS credentials file: the user JWT and the NKey seed that signs the server's
//! nonce, in the armoured blocks every NATS client reads (`nats --creds`, `nsc`, async-nats).

use crate::secret::Secret;

/// A user's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Creds {
    /// The user JWT (not secret: useless without the seed).
    pub jwt: String,
    /// The user's NKey seed.
    pub seed: Secret,
}

/// A credentials file that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("credentials file: {0}")]
pub struct CredsError(String);

impl Creds {
    /// The file's text.
    pub fn format(&self) -> Secret {
        Secret::new(format!(
            "-----BEGIN NATS USER JWT-----\n{}\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\
             NKEYs are sensitive and should be treated as secrets.\n\n\
             -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n\n\
             *************************************************************\n",
            self.jwt,
            self.seed.expose()
        ))
    }

    /// Reads the text of a credentials file: the first armoured block is the JWT, the second
    /// the seed.
    pub fn parse(text: &str) -> Result<Self, CredsError> {
        let mut blocks = Vec::new();
        let mut lines = text.lines().map(str::trim);
        while let Some(line) = lines.next() {
            if line.starts_with("-----BEGIN") && line.ends_with("-----") {
                let body = lines.next().unwrap_or_default();
                blocks.push(body.to_string());
            }
        }
        let (Some(jwt), Some(seed)) = (blocks.first(), blocks.get(1)) else {
            return Err(CredsError(
                "want a -----BEGIN NATS USER JWT----- block and a -----BEGIN USER NKEY SEED----- block"
                    .into(),
            ));
        };
        if jwt.split('.').count() != 3 {
            return Err(CredsError("the first block is not a JWT".into()));
        }
        if nkeys::KeyPair::from_seed(seed).is_err() {
            return Err(CredsError("the second block is not an NKey seed".into()));
        }
        Ok(Self {
            jwt: jwt.clone(),
            seed: Secret::new(seed.clone()),
        })
    }

    /// The public key of the seed.
    pub fn public_key(&self) -> String {
        nkeys::KeyPair::from_seed(self.seed.expose())
            .map(|k| k.public_key())
            .unwrap_or_default()
    }
}

/// A credentials file read again at every (re)connect, so credentials rotated on disk
/// (`flotilla-hub rotate hub`) are picked up by a running client without a restart.
#[derive(Debug, Clone)]
pub struct CredsFile(pub std::path::PathBuf);

impl flotilla_bus::connect::Authenticator for CredsFile {
    fn credentials(&self) -> Result<(String, String), String> {
        let text =
            std::fs::read_to_string(&self.0).map_err(|e| format!("{}: {e}", self.0.display()))?;
        let creds = Creds::parse(&text).map_err(|e| format!("{}: {e}", self.0.display()))?;
        Ok((creds.jwt, creds.seed.expose().to_string()))
    }

    fn refused(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_round_trip_and_never_print_the_seed() {
        let user = nkeys::KeyPair::new_user();
        let creds = Creds {
            jwt: "eyJh.eyJi.c2ln".into(),
            seed: Secret::new(user.seed().unwrap()),
        };
        let text = creds.format();
        assert_eq!(Creds::parse(text.expose()).unwrap(), creds);
        assert_eq!(creds.public_key(), user.public_key());
        let shown = format!("{creds:?} {text:?} {text}");
        assert!(!shown.contains(&user.seed().unwrap()), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn broken_files_say_what_is_missing() {
        assert!(Creds::parse("").unwrap_err().to_string().contains("want a"));
        let no_seed = "-----BEGIN NATS USER JWT-----\na.b.c\n------END NATS USER JWT------\n\
                       -----BEGIN USER NKEY SEED-----\nnot-a-seed\n------END USER NKEY SEED------\n";
        assert!(
            Creds::parse(no_seed)
                .unwrap_err()
                .to_string()
                .contains("not an NKey seed")
        );
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Any JWT-shaped first block and any user seed survive a format/parse round trip,
        /// whatever text surrounds the blocks.
        #[test]
        fn round_trip(jwt in "[A-Za-z0-9_-]{1,40}\\.[A-Za-z0-9_-]{1,40}\\.[A-Za-z0-9_-]{1,40}",
                      before in "[a-z #\n]{0,40}") {
            let seed = nkeys::KeyPair::new_user().seed().unwrap();
            let creds = Creds { jwt, seed: Secret::new(seed) };
            let text = format!("{before}\n{}", creds.format().expose());
            prop_assert_eq!(Creds::parse(&text).unwrap(), creds);
        }
    }
}
