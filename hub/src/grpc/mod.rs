//! The gRPC API (`flotilla.v1`): cluster and cluster-set services. Errors map to the status
//! codes clients expect: `INVALID_ARGUMENT` naming the field, `NOT_FOUND`, `ABORTED` for a stale
//! resourceVersion, `UNAVAILABLE` when storage is down.

pub mod cluster;
pub mod clusterset;
pub mod placement;
pub mod work;

use crate::cluster::ClusterError;
use crate::clusterset::SetError;
use tonic::Status;

impl From<ClusterError> for Status {
    fn from(e: ClusterError) -> Self {
        match &e {
            ClusterError::NotFound(_) | ClusterError::Gone(_) => Status::not_found(e.to_string()),
            ClusterError::Invalid(_) => Status::invalid_argument(e.to_string()),
            ClusterError::Unavailable(_) => Status::unavailable(e.to_string()),
            ClusterError::Conflict(_) => Status::aborted(e.to_string()),
            ClusterError::Precondition(_) => Status::failed_precondition(e.to_string()),
        }
    }
}

impl From<SetError> for Status {
    fn from(e: SetError) -> Self {
        match &e {
            SetError::Invalid(_) => Status::invalid_argument(e.to_string()),
            SetError::NotFound(_) => Status::not_found(e.to_string()),
            SetError::Conflict(_) => Status::aborted(e.to_string()),
            SetError::Precondition(_) => Status::failed_precondition(e.to_string()),
            SetError::Store(_) => Status::unavailable(e.to_string()),
        }
    }
}
