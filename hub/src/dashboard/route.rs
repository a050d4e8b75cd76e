//! Which view a request asks for (pure): every view has its own URL, so an operator can link and
//! bookmark it and the back button works. The server's axum `Router` routes; [`route`] is the
//! same table as data, which the router's fallbacks ask whether a path that did not match
//! exists with another method (405 and `Allow`) or not at all (404).

use http::Method;

/// A static file compiled into the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asset {
    /// `/assets/app.js`: the live feed's client.
    Script,
    /// `/assets/style.css`.
    Style,
}

/// A request's view or action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /`: the fleet overview.
    Overview,
    /// `GET /clusters`: the clusters, paged, filtered and sorted by the query.
    Clusters,
    /// `GET /clusters/<name>`.
    Cluster(String),
    /// `GET /clusters/<cluster>/works/<name>`.
    Work {
        /// The cluster.
        cluster: String,
        /// The work's name.
        name: String,
    },
    /// `POST /clusters/<name>/registration`: accept or deny a registration (form field
    /// `action`, and `key`: the fingerprint of the agent key the admin saw).
    Registration(String),
    /// `GET /works`: every work, paged, filtered by cluster, name and state.
    Works,
    /// `GET /placements`.
    Placements,
    /// `GET /placements/<namespace>/<name>`.
    Placement {
        /// The placement's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// `GET /rollouts`: replica sets and add-ons.
    Rollouts,
    /// `GET /rollouts/<namespace>/<name>`: a replica set's rollout.
    Rollout {
        /// The replica set's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// `POST /rollouts/<namespace>/<name>`: pause, resume or undo (form field `action`).
    RolloutAction {
        /// The replica set's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// `GET /addons/<name>`: an add-on's rollout over its install strategy's placements.
    AddOn(String),
    /// `GET /policies`: compliance per policy and cluster.
    Policies,
    /// `GET /gitrepos`: the GitRepos, the commit each delivered.
    GitRepos,
    /// `GET /gitrepos/<namespace>/<name>`: one GitRepo's commits, bundles and clusters.
    GitRepo {
        /// The GitRepo's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// `GET /events`: the live feed (Server-Sent Events).
    Events,
    /// `GET /login`: the sign-in form.
    LoginForm,
    /// `POST /login`: signs in with a token.
    Login,
    /// `POST /logout`.
    Logout,
    /// `GET /oidc/start`: the sign-in with the OIDC issuer begins.
    OidcStart,
    /// `GET /oidc/callback`: the issuer sends the browser back.
    OidcCallback,
    /// `GET /assets/…`.
    Asset(Asset),
}

/// Why no route matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoRoute {
    /// No such page.
    NotFound,
    /// The page exists; the method does not (the allowed one named).
    Method(&'static str),
}

/// The route of `method path` (the path without its query).
pub fn route(method: &Method, path: &str) -> Result<Route, NoRoute> {
    let segments: Vec<String> = match path.strip_prefix('/') {
        Some("") => Vec::new(),
        Some(rest) => rest
            .trim_end_matches('/')
            .split('/')
            .map(decode)
            .collect::<Option<_>>()
            .ok_or(NoRoute::NotFound)?,
        None => return Err(NoRoute::NotFound),
    };
    let seg: Vec<&str> = segments.iter().map(String::as_str).collect();
    let get = |r: Route| {
        if method == Method::GET || method == Method::HEAD {
            Ok(r)
        } else {
            Err(NoRoute::Method("GET"))
        }
    };
    let post = |r: Route| {
        if method == Method::POST {
            Ok(r)
        } else {
            Err(NoRoute::Method("POST"))
        }
    };
    let named = |s: &str| !s.is_empty();
    match seg[..] {
        [] => get(Route::Overview),
        ["clusters"] => get(Route::Clusters),
        ["clusters", name] if named(name) => get(Route::Cluster(name.into())),
        ["clusters", name, "registration"] if named(name) => post(Route::Registration(name.into())),
        ["clusters", cluster, "works", name] if named(cluster) && named(name) => get(Route::Work {
            cluster: cluster.into(),
            name: name.into(),
        }),
        ["works"] => get(Route::Works),
        ["placements"] => get(Route::Placements),
        ["placements", ns, name] if named(ns) && named(name) => get(Route::Placement {
            namespace: ns.into(),
            name: name.into(),
        }),
        ["rollouts"] => get(Route::Rollouts),
        ["rollouts", ns, name] if named(ns) && named(name) => {
            let (namespace, name) = (ns.to_string(), name.to_string());
            if method == Method::POST {
                Ok(Route::RolloutAction { namespace, name })
            } else {
                get(Route::Rollout { namespace, name })
            }
        }
        ["addons", name] if named(name) => get(Route::AddOn(name.into())),
        ["policies"] => get(Route::Policies),
        ["gitrepos"] => get(Route::GitRepos),
        ["gitrepos", ns, name] if named(ns) && named(name) => get(Route::GitRepo {
            namespace: ns.into(),
            name: name.into(),
        }),
        ["events"] => get(Route::Events),
        ["login"] if method == Method::POST => Ok(Route::Login),
        ["login"] => get(Route::LoginForm),
        ["logout"] => post(Route::Logout),
        ["oidc", "start"] => get(Route::OidcStart),
        ["oidc", "callback"] => get(Route::OidcCallback),
        ["assets", "app.js"] => get(Route::Asset(Asset::Script)),
        ["assets", "style.css"] => get(Route::Asset(Asset::Style)),
        _ => Err(NoRoute::NotFound),
    }
}

/// A percent-decoded path segment (`None`: not UTF-8, or it hides a `/`).
fn decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let s = String::from_utf8(out).ok()?;
    (!s.contains('/')).then_some(s)
}

/// The query's `key=value` pairs, decoded.
pub fn query(q: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// The first value of `key` in decoded pairs.
pub fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
