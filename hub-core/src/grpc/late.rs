//! A gRPC service that exists only while this hub holds what it needs: the controllers'
//! services (sets, placements, replica sets, add-ons) run on the hub holding the controllers'
//! unit. The server is built once; each such service sits behind a [`Late`] that calls the
//! current instance, or answers `UNAVAILABLE` while there is none.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::watch;

/// The holder of a service that comes and goes.
pub struct LateSlot<S>(watch::Sender<Option<S>>);

impl<S> LateSlot<S> {
    /// An empty slot and the service that serves from it.
    pub fn new() -> (Self, Late<S>) {
        let (tx, rx) = watch::channel(None);
        (Self(tx), Late(rx))
    }

    /// Puts a service in (or takes it out with `None`).
    pub fn set(&self, service: Option<S>) {
        self.0.send_replace(service);
    }
}

/// Serves from a [`LateSlot`].
pub struct Late<S>(watch::Receiver<Option<S>>);

impl<S> Clone for Late<S> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for Late<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> tower::Service<http::Request<B>> for Late<S>
where
    S: tower::Service<
            http::Request<B>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // tonic's generated servers are always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let current = self.0.borrow().clone();
        match current {
            Some(mut service) => Box::pin(async move { service.call(req).await }),
            None => Box::pin(std::future::ready(Ok(tonic::Status::unavailable(format!(
                "{} runs on the hub holding the controllers, and this hub does not hold them now; retry",
                S::NAME
            ))
            .into_http()))),
        }
    }
}
