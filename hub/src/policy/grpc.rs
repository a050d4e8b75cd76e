//! `flotilla.v1.PolicyService`: Policies, PlacementBindings, PolicySets and PlacementRules.
//!
//! Fenced by the caller's grants (issue 48): each object is an object of its namespace, read by
//! the namespace's viewers and written by its editors. Never by a cluster's viewers because a
//! cluster has the namespace's name (review r1 §5: cluster names are free, so a team could name
//! a cluster after another team's workspace); replicated policies are not stored as Policies,
//! a cluster's compliance is read through its root policy.

use crate::grants::{Target, Verb};
use crate::grpc::guard;
use crate::policy::{Policies, PolicyError};
use flotilla_api::v1::policy_service_server::PolicyService;
use flotilla_api::v1::{
    DeletePolicyResponse, GetPolicyRequest, HubConfigMap, HubSecret, HubSecretRecord,
    ListHubDataResponse, ListPlacementBindingsResponse, ListPlacementRulesResponse,
    ListPoliciesRequest, ListPoliciesResponse, ListPolicySetsResponse, ObjectMeta,
    PlacementBinding, PlacementRule, Policy, PolicyDetails, PolicyEvent, PolicySet,
    RenderPolicyRequest, RenderedPolicy,
};
use tonic::{Request, Response, Status};

impl From<PolicyError> for Status {
    fn from(e: PolicyError) -> Self {
        match e {
            PolicyError::Invalid(_) => Status::invalid_argument(e.to_string()),
            PolicyError::NotFound(_) => Status::not_found(e.to_string()),
            PolicyError::Conflict(_) => Status::aborted(e.to_string()),
            PolicyError::Unavailable(_) | PolicyError::Gone(_) => {
                Status::unavailable(e.to_string())
            }
        }
    }
}

/// The service implementation.
pub struct PolicyApi {
    policies: Policies,
}

impl PolicyApi {
    /// A service over the hub's governance objects.
    pub fn new(policies: Policies) -> Self {
        Self { policies }
    }
}

fn check(r: &GetPolicyRequest) -> Result<(), Status> {
    guard::namespace("namespace", &r.namespace, false)?;
    guard::object("name", &r.name)
}

/// Rows of a `GetPolicyDetails` page when the caller asks for none, and at most.
pub const DETAILS_PAGE: u32 = 1_000;

/// The page a `GetPolicyDetails` request asks for: at most [`DETAILS_PAGE`] rows (the default
/// too), after the cluster its token names (a cluster name, checked as one).
fn details_page(r: &GetPolicyRequest) -> Result<crate::policy::actor::DetailsPage, Status> {
    let after = if r.page_token.is_empty() {
        None
    } else {
        guard::object("page_token", &r.page_token)?;
        Some(r.page_token.clone())
    };
    let limit = match r.page_size {
        0 => DETAILS_PAGE,
        n => n.min(DETAILS_PAGE),
    };
    Ok(crate::policy::actor::DetailsPage {
        after,
        limit: limit as usize,
    })
}

/// Whether the caller of `req` may `verb` `kind` `namespace/name`: `view` or `edit` on the
/// namespace.
fn allow<T>(
    req: &Request<T>,
    verb: Verb,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<(), Status> {
    guard::check(
        req,
        verb,
        Target::Namespace { name: namespace },
        &format!(
            "{} {kind} {namespace}/{name}",
            if verb == Verb::Read { "get" } else { "write" }
        ),
    )
}

/// The namespace and name of an object's metadata.
fn key_of(meta: Option<&ObjectMeta>) -> (String, String) {
    meta.map(|m| (m.namespace.clone(), m.name.clone()))
        .unwrap_or_default()
}

/// Whether `vis` shows an object of namespace `namespace` (a workspace it sees).
fn shows(vis: &guard::Visibility, namespace: &str) -> bool {
    vis.namespace(namespace)
}

fn list_ns(r: &ListPoliciesRequest) -> Result<&str, Status> {
    guard::namespace("namespace", &r.namespace, true)?;
    Ok(&r.namespace)
}

/// An apply of a `kind` whose metadata is `meta`: its namespace checked and the caller's write
/// on it allowed.
fn may_apply<T>(request: &Request<T>, kind: &str, meta: Option<&ObjectMeta>) -> Result<(), Status> {
    let (namespace, name) = key_of(meta);
    guard::namespace("metadata.namespace", &namespace, false)?;
    allow(request, Verb::Write, kind, &namespace, &name)
}

/// A get or delete of the `kind` `request` names: the name checked and the caller's `verb`
/// allowed; the request.
fn named(
    request: Request<GetPolicyRequest>,
    verb: Verb,
    kind: &str,
) -> Result<GetPolicyRequest, Status> {
    check(request.get_ref())?;
    let r = request.get_ref();
    allow(&request, verb, kind, &r.namespace, &r.name)?;
    Ok(request.into_inner())
}

/// The `items` in namespaces `vis` shows.
fn visible<T>(
    vis: &guard::Visibility,
    mut items: Vec<T>,
    meta: impl Fn(&T) -> Option<&ObjectMeta>,
) -> Vec<T> {
    items.retain(|o| shows(vis, &key_of(meta(o)).0));
    items
}

#[tonic::async_trait]
impl PolicyService for PolicyApi {
    async fn apply_policy(&self, request: Request<Policy>) -> Result<Response<Policy>, Status> {
        may_apply(&request, "Policy", request.get_ref().metadata.as_ref())?;
        Ok(Response::new(
            self.policies.apply_policy(request.into_inner()).await?,
        ))
    }

    async fn get_policy(
        &self,
        request: Request<GetPolicyRequest>,
    ) -> Result<Response<Policy>, Status> {
        let r = named(request, Verb::Read, "Policy")?;
        self.policies
            .get_policy(&r.namespace, &r.name)
            .map(|p| Response::new((*p).clone()))
            .ok_or_else(|| {
                Status::not_found(format!("Policy {}/{} not found", r.namespace, r.name))
            })
    }

    async fn list_policies(
        &self,
        request: Request<ListPoliciesRequest>,
    ) -> Result<Response<ListPoliciesResponse>, Status> {
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        let ns = list_ns(&r)?;
        Ok(Response::new(ListPoliciesResponse {
            items: self
                .policies
                .list_policies(ns)
                .into_iter()
                .filter(|p| shows(&vis, &key_of(p.metadata.as_ref()).0))
                .map(|p| (*p).clone())
                .collect(),
        }))
    }

    async fn delete_policy(
        &self,
        request: Request<GetPolicyRequest>,
    ) -> Result<Response<DeletePolicyResponse>, Status> {
        let r = named(request, Verb::Write, "Policy")?;
        self.policies.delete_policy(&r.namespace, &r.name).await?;
        Ok(Response::new(DeletePolicyResponse {}))
    }

    async fn get_policy_details(
        &self,
        request: Request<GetPolicyRequest>,
    ) -> Result<Response<PolicyDetails>, Status> {
        let r = request.get_ref();
        check(r)?;
        let page = details_page(r)?;
        allow(&request, Verb::Read, "Policy", &r.namespace, &r.name)?;
        let r = request.into_inner();
        let first = page.after.is_none();
        let policy = self
            .policies
            .get_policy(&r.namespace, &r.name)
            .map(|p| (*p).clone())
            .ok_or_else(|| {
                Status::not_found(format!("Policy {}/{} not found", r.namespace, r.name))
            })?;
        let reports = self.policies.details(&r.namespace, &r.name, page).await?;
        Ok(Response::new(PolicyDetails {
            policy: first.then_some(policy),
            clusters: reports.clusters,
            next_page_token: reports.next.unwrap_or_default(),
        }))
    }

    type WatchPoliciesStream = crate::grpc::WatchStream<PolicyEvent>;

    async fn watch_policies(
        &self,
        request: Request<ListPoliciesRequest>,
    ) -> Result<Response<Self::WatchPoliciesStream>, Status> {
        let watching = crate::grpc::WatchSettings::of(&request);
        // Fenced by the grants in force: a reload hides (DELETED) or shows (ADDED) policies
        // (review r1 §6).
        let (teams, caller) = guard::Teams::of(&request);
        let fence =
            crate::grpc::WatchFence::new(&teams, caller.as_ref(), crate::grpc::By::InNamespace);
        let r = request.into_inner();
        let namespace = list_ns(&r)?.to_string();
        Ok(Response::new(crate::grpc::watch_fenced(
            &watching,
            self.policies.views(),
            fence,
            move |_, p: &Policy| {
                namespace.is_empty()
                    || p.metadata
                        .as_ref()
                        .is_some_and(|m| m.namespace == namespace)
            },
            |ty, p: &Policy| PolicyEvent {
                r#type: ty as i32,
                policy: Some(p.clone()),
            },
        )))
    }

    async fn apply_placement_binding(
        &self,
        request: Request<PlacementBinding>,
    ) -> Result<Response<PlacementBinding>, Status> {
        may_apply(
            &request,
            "PlacementBinding",
            request.get_ref().metadata.as_ref(),
        )?;
        Ok(Response::new(
            self.policies.apply_binding(request.into_inner()).await?,
        ))
    }

    async fn list_placement_bindings(
        &self,
        request: Request<ListPoliciesRequest>,
    ) -> Result<Response<ListPlacementBindingsResponse>, Status> {
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        let items = visible(&vis, self.policies.list_bindings(list_ns(&r)?), |o| {
            o.metadata.as_ref()
        });
        Ok(Response::new(ListPlacementBindingsResponse { items }))
    }

    async fn delete_placement_binding(
        &self,
        request: Request<GetPolicyRequest>,
    ) -> Result<Response<DeletePolicyResponse>, Status> {
        let r = named(request, Verb::Write, "PlacementBinding")?;
        self.policies.delete_binding(&r.namespace, &r.name).await?;
        Ok(Response::new(DeletePolicyResponse {}))
    }

    async fn apply_policy_set(
        &self,
        request: Request<PolicySet>,
    ) -> Result<Response<PolicySet>, Status> {
        may_apply(&request, "PolicySet", request.get_ref().metadata.as_ref())?;
        Ok(Response::new(
            self.policies.apply_set(request.into_inner()).await?,
        ))
    }

    async fn list_policy_sets(
        &self,
        request: Request<ListPoliciesRequest>,
    ) -> Result<Response<ListPolicySetsResponse>, Status> {
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        let items = visible(&vis, self.policies.list_sets(list_ns(&r)?), |o| {
            o.metadata.as_ref()
        });
        Ok(Response::new(ListPolicySetsResponse { items }))
    }

    async fn delete_policy_set(
        &self,
        request: Request<GetPolicyRequest>,
    ) -> Result<Response<DeletePolicyResponse>, Status> {
        let r = named(request, Verb::Write, "PolicySet")?;
        self.policies.delete_set(&r.namespace, &r.name).await?;
        Ok(Response::new(DeletePolicyResponse {}))
    }

    async fn apply_placement_rule(
        &self,
        request: Request<PlacementRule>,
    ) -> Result<Response<PlacementRule>, Status> {
        may_apply(
            &request,
            "PlacementRule",
            request.get_ref().metadata.as_ref(),
        )?;
        Ok(Response::new(
            self.policies.apply_rule(request.into_inner()).await?,
        ))
    }

    async fn list_placement_rules(
        &self,
        request: Request<ListPoliciesRequest>,
    ) -> Result<Response<ListPlacementRulesResponse>, Status> {
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        let items = visible(&vis, self.policies.list_rules(list_ns(&r)?), |o| {
            o.metadata.as_ref()
        });
        Ok(Response::new(ListPlacementRulesResponse { items }))
    }

    async fn delete_placement_rule(
        &self,
        request: Request<GetPolicyRequest>,
    ) -> Result<Response<DeletePolicyResponse>, Status> {
        let r = named(request, Verb::Write, "PlacementRule")?;
        self.policies.delete_rule(&r.namespace, &r.name).await?;
        Ok(Response::new(DeletePolicyResponse {}))
    }

    async fn apply_hub_config_map(
        &self,
        request: Request<HubConfigMap>,
    ) -> Result<Response<HubConfigMap>, Status> {
        let meta = request.get_ref().metadata.as_ref();
        guard::object("metadata.name", &key_of(meta).1)?;
        may_apply(&request, "ConfigMap", meta)?;
        let problems = flotilla_api::ocm::hubdata::config_map_problems(request.get_ref());
        if !problems.is_empty() {
            return Err(PolicyError::Invalid(problems).into());
        }
        Ok(Response::new(
            self.policies
                .hubdata()
                .apply_config_map(request.into_inner())
                .await?,
        ))
    }

    async fn delete_hub_config_map(
        &self,
        request: Request<GetPolicyRequest>,
    ) -> Result<Response<DeletePolicyResponse>, Status> {
        let r = named(request, Verb::Write, "ConfigMap")?;
        self.policies
            .hubdata()
            .delete_config_map(&r.namespace, &r.name)
            .await?;
        Ok(Response::new(DeletePolicyResponse {}))
    }

    async fn apply_hub_secret(
        &self,
        request: Request<HubSecret>,
    ) -> Result<Response<HubSecretRecord>, Status> {
        let meta = request.get_ref().metadata.as_ref();
        guard::object("metadata.name", &key_of(meta).1)?;
        may_apply(&request, "Secret", meta)?;
        let problems = flotilla_api::ocm::hubdata::secret_problems(request.get_ref());
        if !problems.is_empty() {
            return Err(PolicyError::Invalid(problems).into());
        }
        Ok(Response::new(
            self.policies
                .hubdata()
                .apply_secret(request.into_inner())
                .await?,
        ))
    }

    async fn delete_hub_secret(
        &self,
        request: Request<GetPolicyRequest>,
    ) -> Result<Response<DeletePolicyResponse>, Status> {
        let r = named(request, Verb::Write, "Secret")?;
        self.policies
            .hubdata()
            .delete_secret(&r.namespace, &r.name)
            .await?;
        Ok(Response::new(DeletePolicyResponse {}))
    }

    async fn render_policy(
        &self,
        request: Request<RenderPolicyRequest>,
    ) -> Result<Response<RenderedPolicy>, Status> {
        let r = request.get_ref();
        guard::namespace("namespace", &r.namespace, false)?;
        guard::object("name", &r.name)?;
        guard::object("cluster", &r.cluster)?;
        allow(&request, Verb::Read, "Policy", &r.namespace, &r.name)?;
        let rendered = self
            .policies
            .render(&r.namespace, &r.name, &r.cluster)
            .await;
        // A decided cluster's copy is the policy's, as its details are; any other cluster is
        // rendered only for a caller who may read that cluster (its name and labels show).
        if !rendered.as_ref().is_ok_and(|x| x.decided) {
            guard::check(
                &request,
                Verb::Read,
                Target::Cluster { name: &r.cluster },
                &format!("get cluster {}", r.cluster),
            )?;
        }
        Ok(Response::new(rendered?))
    }

    async fn list_hub_data(
        &self,
        request: Request<ListPoliciesRequest>,
    ) -> Result<Response<ListHubDataResponse>, Status> {
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        let ns = list_ns(&r)?;
        let hubdata = self.policies.hubdata();
        let config_maps = visible(&vis, hubdata.list_config_maps(ns), |o| o.metadata.as_ref());
        let secrets = visible(&vis, hubdata.list_secrets(ns), |o| o.metadata.as_ref());
        Ok(Response::new(ListHubDataResponse {
            config_maps,
            secrets,
        }))
    }
}
