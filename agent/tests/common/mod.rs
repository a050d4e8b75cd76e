//! Fixtures shared by the agent's test binaries.

use flotilla_testkit::NatsServer;

/// A fresh nats-server holding the status stream as the hub creates it, a JetStream context on
/// it, and a subscription to every status subject: what a spoke's work execution publishes,
/// read back.
pub struct StatusFeed {
    /// The server (stopped when dropped).
    pub nats: NatsServer,
    /// A JetStream context for the agent's publishers.
    pub js: async_nats::jetstream::Context,
    /// Every status message published.
    pub reports: async_nats::Subscriber,
}

/// Starts a [`StatusFeed`].
pub async fn status_feed() -> StatusFeed {
    let nats = NatsServer::start();
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let js = async_nats::jetstream::new(client.clone());
    js.get_or_create_stream(async_nats::jetstream::stream::Config {
        name: flotilla_bus::jetstream::STATUS_STREAM.into(),
        subjects: vec![flotilla_bus::subjects::STATUS_ALL.into()],
        ..Default::default()
    })
    .await
    .expect("status stream");
    let reports = client
        .subscribe(flotilla_bus::subjects::STATUS_ALL)
        .await
        .expect("subscribe");
    StatusFeed { nats, js, reports }
}
