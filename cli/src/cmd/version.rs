//! `flotilla version`: the CLI's version and the hub's (and which agent versions the hub
//! accepts); a warning on stderr when the two are more than one minor line apart.

use crate::hub::Hub;
use anyhow::Result;
use flotilla_api::v1::GetInfoRequest;
use flotilla_api::version::{self, Version};

/// Prints both sides' versions.
pub async fn run(hub: &Hub) -> Result<()> {
    println!("Client: flotilla {}", version::VERSION);
    let info = hub
        .idempotent(async || hub.info().get_info(GetInfoRequest {}).await)
        .await?;
    println!(
        "Hub:    flotilla-hub {} (hub {}; accepts agents {})",
        info.version, info.hub_id, info.accepts_agents
    );
    if let Some(warning) = skew(&info.version) {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// What to say when this CLI and a hub of version `hub` are too far apart.
pub fn skew(hub: &str) -> Option<String> {
    let (cli, hub) = (Version::current(), Version::parse(hub).ok()?);
    if !version::far_apart(&cli, &hub) {
        return None;
    }
    let upgrade = if (cli.major, cli.minor) < (hub.major, hub.minor) {
        "the CLI"
    } else {
        "the hubs"
    };
    Some(format!(
        "flotilla {cli} is talking to hub {hub}, more than one minor version apart: upgrade \
         {upgrade} (docs/operations.md#versions)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hub_more_than_one_minor_away_is_warned_about_naming_what_to_upgrade() {
        let cli = Version::current();
        assert_eq!(skew(version::VERSION), None);
        let next = format!("{}.{}.0", cli.major, cli.minor + 1);
        assert_eq!(skew(&next), None);
        let far = format!("{}.{}.0", cli.major, cli.minor + 2);
        let text = skew(&far).expect("two minors ahead");
        assert!(
            text.contains(&format!("talking to hub {far}")) && text.contains("upgrade the CLI"),
            "{text}"
        );
        let older = format!("{}.0.0", cli.major + 1);
        assert!(
            skew(&older)
                .expect("a major apart")
                .contains(&format!("hub {older}"))
        );
        assert_eq!(skew("not a version"), None);
    }
}
