//! The gRPC API as the server builds it: every service once, by name — what the server
//! routes and what its health reports, from one list (pure construction).

use std::convert::Infallible;

/// A gRPC service the API can route (what tonic's generated servers and [`super::late::Late`]
/// are).
pub trait GrpcService:
    tower::Service<
        http::Request<tonic::body::Body>,
        Response = http::Response<tonic::body::Body>,
        Error = Infallible,
        Future: Send + 'static,
    > + tonic::server::NamedService
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> GrpcService for S where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
            Future: Send + 'static,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// The gRPC API: every service once, by name — what the server routes and what its health
/// reports, from one list.
pub struct Api {
    routes: tonic::service::Routes,
    names: Vec<&'static str>,
}

impl Api {
    /// The API with reflection and health (health reports each service added).
    pub fn new(health: impl GrpcService) -> Result<Self, tonic_reflection::server::Error> {
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(flotilla_api::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()?;
        Ok(Self {
            routes: tonic::service::Routes::new(health).add_service(reflection),
            names: Vec::new(),
        })
    }

    /// The names of the services added so far, in order.
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// Adds a service.
    pub fn with<S: GrpcService>(mut self, service: S) -> Self {
        self.names.push(S::NAME);
        self.routes = self.routes.add_service(service);
        self
    }

    /// Reports every added service serving, and returns the routes.
    pub async fn serving(
        self,
        health: &tonic_health::server::HealthReporter,
    ) -> tonic::service::Routes {
        for name in &self.names {
            health
                .set_service_status(*name, tonic_health::ServingStatus::Serving)
                .await;
        }
        self.routes
    }
}
