//! A fake agent on a raw NATS connection, for tests that need an agent's messages one at a time.

use super::SOON;
use flotilla_testkit::NatsServer;

/// A fake agent on a raw NATS connection: registers, then only does what each test step says.
pub struct RawAgent {
    js: async_nats::jetstream::Context,
    spec: async_nats::Subscriber,
    sequence: u64,
}

impl RawAgent {
    pub async fn register(nats: &NatsServer, name: &str) -> Self {
        use flotilla_api::v1::RegistrationRequest;
        use flotilla_bus::envelope::{Event, types};
        let client = async_nats::connect(nats.url()).await.unwrap();
        let spec = client
            .subscribe(flotilla_bus::subjects::spec(name))
            .await
            .unwrap();
        let req = RegistrationRequest {
            cluster_name: name.into(),
            agent_version: flotilla_api::version::VERSION.into(),
            ..Default::default()
        };
        let ev = Event::new(types::registration_request(), "raw", name, &req);
        tokio::time::timeout(
            SOON,
            client.request(
                flotilla_bus::subjects::register(name),
                ev.encode(1 << 20).unwrap(),
            ),
        )
        .await
        .expect("registration answered in time")
        .expect("registration answered");
        Self {
            js: async_nats::jetstream::new(client),
            spec,
            sequence: 0,
        }
    }

    /// Publishes a status-stream event (lease or cluster status) as the agent would.
    pub async fn publish(&mut self, name: &str, kind: &str, ev: flotilla_bus::envelope::Event) {
        self.publish_on(flotilla_bus::subjects::status(name, kind, None), ev)
            .await;
    }

    /// Publishes a status-stream event on `subject` (a work's status has its resource id in it).
    pub async fn publish_on(&mut self, subject: String, ev: flotilla_bus::envelope::Event) {
        self.sequence += 1;
        let ev = ev.with_sequence(self.sequence).with_status_hash();
        self.js
            .publish_with_headers(
                subject,
                flotilla_bus::envelope::headers(&ev),
                ev.encode(1 << 20).unwrap(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }

    pub async fn renew(&mut self, name: &str) {
        use flotilla_api::v1::LeaseRenewal;
        use flotilla_bus::envelope::{Event, types};
        let renewal = LeaseRenewal {
            cluster_name: name.into(),
            renew_time: Some(flotilla_api::meta::now()),
        };
        let ev = Event::new(types::lease_renewal(), "raw", name, &renewal);
        self.publish(name, flotilla_bus::subjects::KIND_LEASE, ev)
            .await;
    }

    /// The next work spec pushed on the spec subject within `within`, if any.
    pub async fn next_work(
        &mut self,
        within: std::time::Duration,
    ) -> Option<flotilla_api::v1::ManifestWork> {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let msg = tokio::time::timeout_at(deadline, self.spec.next())
                .await
                .ok()?
                .expect("spec subscription open");
            let ev = flotilla_bus::envelope::Event::decode(&msg.payload, 1 << 20).unwrap();
            if flotilla_bus::works::is_work(&ev.event_type) {
                return Some(ev.decode_data("ManifestWork").unwrap());
            }
        }
    }

    /// The next registration answer pushed on the spec subject that lists `n` namespaces.
    pub async fn pushed_list(&mut self, n: usize) -> Vec<(String, String)> {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + SOON;
        loop {
            let msg = tokio::time::timeout_at(deadline, self.spec.next())
                .await
                .expect("a registration answer listing the namespaces in time")
                .expect("spec subscription open");
            let resp = flotilla_bus::envelope::Event::decode(&msg.payload, 1 << 20)
                .unwrap()
                .decode_data::<flotilla_api::v1::RegistrationResponse>("RegistrationResponse")
                .unwrap();
            if resp.managed_namespaces.len() == n {
                return resp
                    .managed_namespaces
                    .into_iter()
                    .map(|m| (m.cluster_set, m.name))
                    .collect();
            }
        }
    }
}
