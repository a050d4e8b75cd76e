//! API tokens for tests of roles: a token file with an admin, a deployer and a read-only
//! identity, and clients that send one of them with every call.

use flotilla_api::v1::work_service_client::WorkServiceClient;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// admin: anything; ci: OCM's example executor and anything in team-a; bob: reads only.
pub const TOKENS: &str = "\
# admin: anything; ci: default/executor1 and anything in team-a; bob: reads only
s3cr3t-admin-token-0001,alice,admin
s3cr3t-deploy-token-002,ci,deployer,default/executor1 team-a/*
s3cr3t-view-token-00003,bob,read-only
";
/// The admin's token.
pub const ADMIN: &str = "s3cr3t-admin-token-0001";
/// The deployer's token.
pub const DEPLOYER: &str = "s3cr3t-deploy-token-002";
/// The read-only token.
pub const VIEWER: &str = "s3cr3t-view-token-00003";

/// The hub's parsed token file.
pub fn tokens() -> flotilla_hub::grpc::auth::Tokens {
    flotilla_hub::grpc::auth::Tokens::parse("tokens.csv", TOKENS).unwrap()
}

/// Adds a bearer token to every call.
#[derive(Clone)]
pub struct Bearer(pub &'static str);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let value: MetadataValue<_> = format!("Bearer {}", self.0).parse().unwrap();
        req.metadata_mut().insert("authorization", value);
        Ok(req)
    }
}

/// A channel whose calls carry a token.
pub type Authed = InterceptedService<Channel, Bearer>;

/// A hub on `nats` with the token file, and a channel to its API.
pub async fn hub_with_tokens(nats: &flotilla_testkit::NatsServer) -> (flotilla_hub::Hub, Channel) {
    let mut config = super::hub_config(&nats.url());
    config.api.tokens = Some(tokens());
    let hub = super::start_hub(config).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (hub, channel)
}

/// The work service as the holder of `token`.
pub fn works_as(channel: &Channel, token: &'static str) -> WorkServiceClient<Authed> {
    WorkServiceClient::with_interceptor(channel.clone(), Bearer(token))
}
