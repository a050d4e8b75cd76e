//! The shape every family shares, written once (pure wiring): a family says what is its own —
//! its name, who may call its services, the report kinds it takes, its settings and how it
//! starts — as a [`Recipe`], and [`Served`] makes it a [`Family`]: it holds the settings and
//! the late slots of the services, adds them to the API, and fills the slots with what `start`
//! returns.
//!
//! ```text
//! pub struct ReplicaSetFamily;
//!
//! impl Recipe for ReplicaSetFamily {
//!     const NAME: &'static str = "replicasets";
//!     const ACCESS: &'static [Rows] = &[("flotilla.v1.ReplicaSetService", &[("GetReplicaSet", Read, FILTERED), …])];
//!     type Settings = ();
//!     type Services = (ReplicaSetServiceServer<ReplicaSetApi>,);
//!
//!     async fn start(_: &(), cx: &mut Start<'_>) -> Result<Self::Services, StartError> {
//!         let replicasets = …;
//!         cx.provide(replicasets.clone());
//!         Ok((ReplicaSetServiceServer::new(ReplicaSetApi::new(replicasets)),))
//!     }
//! }
//! // in the hub's list: Served::<ReplicaSetFamily>::boxed(())
//! ```

use super::{Family, Slot, Start, StartError};
use crate::grpc::access::Rows;
use crate::grpc::api::{Api, GrpcService};
use crate::report::Kind;
use futures::future::BoxFuture;

/// What a controller family is made of; [`Served`] runs it as a [`Family`].
pub trait Recipe: Send + Sync + 'static {
    /// Its name (the log, spans, errors).
    const NAME: &'static str;
    /// Who may call each method of its services: one row per service, documented by the same
    /// table in its `family.rs` (a unit test holds them equal, and fails for a served method
    /// without a row).
    const ACCESS: &'static [Rows];
    /// The status report kinds it takes from the router ([`Start::take_reports`]).
    const REPORTS: &'static [Kind] = &[];
    /// Its settings (flags), from the hub's configuration.
    type Settings: Send + Sync + 'static;
    /// Its gRPC services as `start` builds them: `()`, `(S,)`, `(S1, S2)` or `(S1, S2, S3)`.
    type Services: Services;

    /// Loads its state under the controllers' fence, starts its tasks, provides its handles,
    /// and returns its services: every hub serves them from late slots, filled while the
    /// family runs here.
    fn start(
        settings: &Self::Settings,
        cx: &mut Start<'_>,
    ) -> impl Future<Output = Result<Self::Services, StartError>> + Send;
}

/// A family's gRPC services, as a tuple: their slots, and how they are served and filled.
pub trait Services: Send + Sync + 'static {
    /// One [`Slot`] per service.
    type Slots: Default + Send + Sync + 'static;

    /// Adds each service, served from its slot, to the API.
    fn serve(slots: &Self::Slots, api: Api) -> Api;

    /// Serves each service from its slot once every family is up ([`Start::serve_from`]).
    fn fill(self, slots: &Self::Slots, cx: &mut Start<'_>);
}

impl Services for () {
    type Slots = ();

    fn serve(_: &(), api: Api) -> Api {
        api
    }

    fn fill(self, _: &(), _: &mut Start<'_>) {}
}

/// `Services` for tuples of services, one slot each.
macro_rules! services {
    ($($s:ident $i:tt),+) => {
        impl<$($s: GrpcService),+> Services for ($($s,)+) {
            type Slots = ($(Slot<$s>,)+);

            fn serve(slots: &Self::Slots, api: Api) -> Api {
                api$(.with(slots.$i.served()))+
            }

            fn fill(self, slots: &Self::Slots, cx: &mut Start<'_>) {
                $(cx.serve_from(slots.$i.slot(), self.$i);)+
            }
        }
    };
}

services!(A 0);
services!(A 0, B 1);
services!(A 0, B 1, C 2);

/// A [`Recipe`] run as a [`Family`]: its settings and its services' slots.
pub struct Served<R: Recipe> {
    settings: R::Settings,
    slots: <R::Services as Services>::Slots,
}

impl<R: Recipe> Served<R> {
    /// The family with its settings.
    pub fn new(settings: R::Settings) -> Self {
        Self {
            settings,
            slots: Default::default(),
        }
    }

    /// The family with its settings, for the hub's list.
    pub fn boxed(settings: R::Settings) -> Box<dyn Family> {
        Box::new(Self::new(settings))
    }
}

impl<R: Recipe> Family for Served<R> {
    fn name(&self) -> &'static str {
        R::NAME
    }

    fn serve(&self, api: Api) -> Api {
        R::Services::serve(&self.slots, api)
    }

    fn access(&self) -> &'static [Rows] {
        R::ACCESS
    }

    fn reports(&self) -> &'static [Kind] {
        R::REPORTS
    }

    fn start<'a>(&'a self, cx: &'a mut Start<'_>) -> BoxFuture<'a, Result<(), StartError>> {
        Box::pin(async move {
            let services = R::start(&self.settings, cx).await?;
            services.fill(&self.slots, cx);
            Ok(())
        })
    }
}
