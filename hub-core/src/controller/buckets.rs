//! A family's set of buckets, declared once (pure declaration; opening is the only I/O).
//!
//! Every family keeps its state in a few JetStream KV buckets, opened when it starts and fenced
//! with the controllers' epoch (a hub that lost the controllers' lease can no longer write).
//! [`buckets!`](crate::buckets) declares the set as a struct of [`Bucket`](crate::store::Bucket)s
//! with an `open` that opens each through [`Start::open`](super::Start::open), so no family
//! opens or fences a bucket by hand:
//!
//! ```ignore
//! flotilla_hub_core::buckets! {
//!     /// The buckets of governance state.
//!     pub struct Buckets {
//!         /// Policies.
//!         policies: Policy = "policies",
//!         /// Per-cluster records.
//!         status: PolicyClusterRecord = "policystatus",
//!     }
//! }
//! // in the family's start: let buckets = Buckets::open(cx).await?;
//! ```

/// Declares a family's buckets: a `Clone` struct of fenced [`Bucket`](crate::store::Bucket)s
/// with `async fn open(&Start) -> Result<Self, StartError>` (see the module's documentation).
#[macro_export]
macro_rules! buckets {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field:ident : $ty:ty = $bucket:expr
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone)]
        $vis struct $name {
            $(
                $(#[$field_meta])*
                pub $field: $crate::store::Bucket<$ty>,
            )+
        }

        impl $name {
            /// Creates (if needed) and opens every bucket, fenced with the controllers' epoch.
            pub async fn open(
                cx: &$crate::controller::Start<'_>,
            ) -> ::std::result::Result<Self, $crate::controller::StartError> {
                Ok(Self {
                    $($field: cx.open($bucket).await?,)+
                })
            }

            /// Creates (if needed) and opens every bucket unfenced: for tools and benchmarks
            /// that run a family's parts outside the controllers (their writes carry no epoch).
            pub async fn open_unfenced(
                js: &async_nats::jetstream::Context,
                opts: flotilla_bus::jetstream::StreamOptions,
            ) -> ::std::result::Result<Self, $crate::store::StoreError> {
                Ok(Self {
                    $($field: $crate::store::Bucket::open(js, $bucket, opts).await?,)+
                })
            }
        }
    };
}
