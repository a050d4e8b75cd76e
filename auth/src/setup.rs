//! The secure directory `flotilla-hub init --dir DIR` writes and `flotilla-hub --secure-dir DIR`
//! reads:
//!
//! | file | what | mode |
//! |---|---|---|
//! | `nats-server.conf` | operator mode: operator JWT, system account, the NATS-based (`full`) account resolver in `jwt/` with both accounts preloaded, JetStream in `jetstream/`, the listen address, TLS when asked | 0644 |
//! | `operator.jwt`, `account.jwt`, `agents.jwt`, `system.jwt` | the JWTs (the hub's account, the agents' account, the system account) | 0644 |
//! | `keys/*.nk` | operator, operator signing, hub account, hub account signing, agents account, agents account signing and system account seeds | 0600 in a 0700 dir |
//! | `hub.creds` | the hub's user (everything in the hub's account) | 0600 |
//! | `sys.creds` | a system-account user the hub pushes account updates (revocations) with | 0600 |
//! | `bootstrap.creds` | the fleet-wide bootstrap user (agents' account): may only ask to register; prefer per-cluster join credentials | 0600 |
//! | `tls/` | with `--tls`: a CA (valid 10 years; its key kept to issue new certificates), the server's certificate and a client certificate (valid [`CERT_DAYS`] days) | keys 0600 |
//!
//! The operator identity key signs only the operator JWT; account JWTs are signed by the
//! operator signing key (which the hub keeps to push revocations), user JWTs by the accounts'
//! signing keys (the hub keeps the agents account's to issue cluster and join credentials, and
//! the hub account's to rotate its own). Why two accounts: [`crate::permissions`].

use crate::creds::Creds;
use crate::jwt::{Account, AccountLimits, Claims, Operator, User};
use crate::permissions;
use crate::secret::{Secret, create_private_dir, write_private, write_public};
use nkeys::KeyPair;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Name of the hub's account.
pub const ACCOUNT_NAME: &str = "flotilla";
/// Name of the agents' account.
pub const AGENTS_ACCOUNT_NAME: &str = "flotilla-agents";

/// What `init` should write.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// Where the NATS server listens (`host:port`).
    pub nats_listen: String,
    /// Write a CA, server and client certificates and make the server require TLS.
    pub tls: bool,
    /// Extra names the server certificate is valid for (besides localhost, 127.0.0.1 and the
    /// listen host).
    pub tls_hosts: Vec<String>,
    /// Make the server start TLS before its INFO line (`handshake_first`, nats-server 2.10.4
    /// and later), so nothing crosses the link in plaintext; clients then need
    /// `--nats-tls-first`. Needs `tls`.
    pub tls_first: bool,
    /// Replace an existing secure directory's files.
    pub force: bool,
    /// JetStream file storage the hub's account may use, in bytes (-1: unlimited).
    pub jetstream_max_bytes: i64,
    /// JetStream memory storage the hub's account may use, in bytes (-1: unlimited).
    pub jetstream_max_memory: i64,
    /// Connections the agents' account may hold at once (-1: unlimited).
    pub agents_max_connections: i64,
}

/// Default JetStream file storage of the hub's account: what the server has (-1). A limit above
/// what the server can reserve disables JetStream for the account altogether, so a fixed default
/// would break small machines; set it to what the server is provisioned with.
pub const DEFAULT_JETSTREAM_MAX_BYTES: i64 = -1;
/// Default JetStream memory storage of the hub's account: what the server has (-1).
pub const DEFAULT_JETSTREAM_MAX_MEMORY: i64 = -1;

impl Default for InitOptions {
    fn default() -> Self {
        Self {
            nats_listen: "127.0.0.1:4222".into(),
            tls: false,
            tls_hosts: Vec::new(),
            tls_first: false,
            force: false,
            jetstream_max_bytes: DEFAULT_JETSTREAM_MAX_BYTES,
            jetstream_max_memory: DEFAULT_JETSTREAM_MAX_MEMORY,
            agents_max_connections: -1,
        }
    }
}

/// Why a secure directory cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file has the wrong content.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The directory already holds a secure setup.
    #[error(
        "{0} already holds a Flotilla secure setup (nats-server.conf or keys/); refusing to overwrite its keys (use --force to replace them)"
    )]
    Exists(PathBuf),
    /// Keys or certificates could not be made.
    #[error("{0}")]
    Crypto(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SetupError + '_ {
    move |source| SetupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// TLS files of a secure directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate clients verify the server with.
    pub ca: PathBuf,
    /// The CA's private key.
    pub ca_key: PathBuf,
    /// The server certificate.
    pub server_cert: PathBuf,
    /// The server key.
    pub server_key: PathBuf,
    /// A client certificate (for mutual TLS clients).
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
    /// The server starts TLS before its INFO line (`init --tls-first`): clients must too.
    pub handshake_first: bool,
}

/// The line of `nats-server.conf`'s `tls` block that makes the server start TLS first.
const HANDSHAKE_FIRST: &str = "handshake_first: true";

impl TlsFiles {
    fn in_dir(dir: &Path) -> Self {
        let tls = dir.join("tls");
        Self {
            ca: tls.join("ca.pem"),
            ca_key: tls.join("ca-key.pem"),
            server_cert: tls.join("server.pem"),
            server_key: tls.join("server-key.pem"),
            client_cert: tls.join("client.pem"),
            client_key: tls.join("client-key.pem"),
            handshake_first: false,
        }
    }
}

/// A secure directory, read back: what the hub needs to issue and revoke.
#[derive(Debug)]
pub struct SecureDir {
    /// The directory.
    pub dir: PathBuf,
    /// Signs account JWTs (revocation pushes).
    pub operator_signing: KeyPair,
    /// The hub account's public key.
    pub account: String,
    /// Signs the hub account's user JWTs (the hub's own credentials).
    pub account_signing: KeyPair,
    /// The agents account's public key.
    pub agents: String,
    /// Signs the agents account's user JWTs (bootstrap, join, cluster and add-on credentials).
    pub agents_signing: KeyPair,
    /// The hub account's JWT as `init` wrote it (limits, signing keys) with the exports and
    /// imports of this version ([`crate::permissions`]): re-signed with the current
    /// revocations whenever they change, and pushed by the hub at its start, so a directory
    /// written by an older version gets the subjects a newer one crosses.
    pub account_jwt: Claims<Account>,
    /// The agents account's JWT, likewise.
    pub agents_jwt: Claims<Account>,
    /// The hub's credentials file.
    pub hub_creds: PathBuf,
    /// The system user's credentials file.
    pub sys_creds: PathBuf,
    /// The bootstrap credentials file.
    pub bootstrap_creds: PathBuf,
    /// The server configuration.
    pub server_conf: PathBuf,
    /// TLS files, when the directory was made with `--tls`.
    pub tls: Option<TlsFiles>,
}

impl SecureDir {
    /// Where the revocations the hub made are kept.
    pub fn revocations_file(&self) -> PathBuf {
        self.dir.join("revocations.json")
    }

    /// Writes a new secure directory.
    pub fn init(dir: &Path, options: &InitOptions) -> Result<Self, SetupError> {
        let conf = dir.join("nats-server.conf");
        if (conf.exists() || dir.join("keys").exists()) && !options.force {
            return Err(SetupError::Exists(dir.to_path_buf()));
        }
        // Checked before anything is written.
        if options.tls_first && !options.tls {
            return Err(SetupError::Invalid {
                path: dir.to_path_buf(),
                message: "--tls-first needs --tls".into(),
            });
        }
        create_private_dir(dir).map_err(io(dir))?;
        remove_stale(dir)?;
        let keys = dir.join("keys");
        create_private_dir(&keys).map_err(io(&keys))?;
        let now = unix_now();

        let operator = KeyPair::new_operator();
        let operator_signing = KeyPair::new_operator();
        let system = KeyPair::new_account();
        let account = KeyPair::new_account();
        let account_signing = KeyPair::new_account();
        let agents = KeyPair::new_account();
        let agents_signing = KeyPair::new_account();

        let jwt_err = |e: crate::jwt::JwtError| SetupError::Crypto(e.to_string());
        let operator_jwt = Claims::new(
            "flotilla-operator",
            operator.public_key(),
            now,
            Operator::new(vec![operator_signing.public_key()], system.public_key()),
        )
        .encode(&operator)
        .map_err(jwt_err)?;
        let system_jwt = Claims::new(
            "SYS",
            system.public_key(),
            now,
            Account::new(AccountLimits::unlimited(), vec![]),
        )
        .encode(&operator_signing)
        .map_err(jwt_err)?;
        let account_jwt = hub_account_claims(
            &account.public_key(),
            &account_signing.public_key(),
            &agents.public_key(),
            options,
            now,
        )
        .encode(&operator_signing)
        .map_err(jwt_err)?;
        let agents_jwt = agents_account_claims(
            &agents.public_key(),
            &agents_signing.public_key(),
            &account.public_key(),
            options,
            now,
        )
        .encode(&operator_signing)
        .map_err(jwt_err)?;

        write_seeds(
            &keys,
            &[
                ("operator.nk", &operator),
                ("operator-signing.nk", &operator_signing),
                ("system.nk", &system),
                ("account.nk", &account),
                ("account-signing.nk", &account_signing),
                ("agents.nk", &agents),
                ("agents-signing.nk", &agents_signing),
            ],
        )?;
        for (name, jwt) in [
            ("operator.jwt", &operator_jwt),
            ("system.jwt", &system_jwt),
            ("account.jwt", &account_jwt),
            ("agents.jwt", &agents_jwt),
        ] {
            let path = dir.join(name);
            write_public(&path, jwt.as_bytes()).map_err(io(&path))?;
        }
        let account_pub = account.public_key();
        let agents_pub = agents.public_key();
        write_first_creds(
            dir,
            now,
            (&account_signing, &account_pub),
            (&agents_signing, &agents_pub),
            &system,
        )?;
        let tls = if options.tls {
            let mut files = TlsFiles::in_dir(dir);
            files.handshake_first = options.tls_first;
            write_tls(&files, &options.nats_listen, &options.tls_hosts)?;
            Some(files)
        } else {
            None
        };
        let jwt_dir = dir.join("jwt");
        std::fs::create_dir_all(&jwt_dir).map_err(io(&jwt_dir))?;
        let text = server_conf(
            dir,
            &options.nats_listen,
            &system.public_key(),
            &[
                (&account_pub, &account_jwt),
                (&agents_pub, &agents_jwt),
                (&system.public_key(), &system_jwt),
            ],
            tls.as_ref(),
        );
        write_public(&conf, text.as_bytes()).map_err(io(&conf))?;
        keep_sealing_key(dir)?;
        Self::load(dir)
    }

    /// Reads a secure directory back.
    pub fn load(dir: &Path) -> Result<Self, SetupError> {
        let seed = |name: &str| {
            let path = dir.join("keys").join(name);
            let text = std::fs::read_to_string(&path).map_err(io(&path))?;
            KeyPair::from_seed(text.trim()).map_err(|e| SetupError::Invalid {
                path: path.clone(),
                message: format!("not an NKey seed: {e}"),
            })
        };
        if !dir.join("keys").join("agents.nk").exists() && dir.join("account.jwt").exists() {
            return Err(SetupError::Invalid {
                path: dir.join("keys").join("agents.nk"),
                message: "missing: this directory was written by an older flotilla-hub init with \
                          one account shared by the hub and the spokes, which a spoke can use \
                          to reach the hub's JetStream; write a new one with flotilla-hub init \
                          --force (docs/security.md: rotating everything)"
                    .into(),
            });
        }
        let operator_signing = seed("operator-signing.nk")?;
        let account = seed("account.nk")?.public_key();
        let account_signing = seed("account-signing.nk")?;
        let agents = seed("agents.nk")?.public_key();
        let agents_signing = seed("agents-signing.nk")?;
        let operator = read_operator(dir, &operator_signing)?;
        let mut account_jwt =
            check_account(dir, "account.jwt", &operator, &account, &account_signing)?;
        let mut agents_jwt = check_account(dir, "agents.jwt", &operator, &agents, &agents_signing)?;
        // The crossings of this version, whatever version wrote the files.
        account_jwt.nats.exports = permissions::hub_exports();
        account_jwt.nats.imports = permissions::hub_imports(&agents);
        agents_jwt.nats.exports = permissions::agents_exports();
        agents_jwt.nats.imports = permissions::agents_imports(&account);
        let files = |name: &str| {
            let path = dir.join(name);
            if path.exists() {
                Ok(path)
            } else {
                Err(SetupError::Invalid {
                    path,
                    message: "missing; run flotilla-hub init --dir DIR".into(),
                })
            }
        };
        let mut tls = TlsFiles::in_dir(dir);
        // The server's configuration says whether it starts TLS first (`init --tls-first`).
        tls.handshake_first = std::fs::read_to_string(dir.join("nats-server.conf"))
            .is_ok_and(|conf| conf.lines().any(|l| l.trim() == HANDSHAKE_FIRST));
        Ok(Self {
            dir: dir.to_path_buf(),
            operator_signing,
            account,
            account_signing,
            agents,
            agents_signing,
            account_jwt,
            agents_jwt,
            hub_creds: files("hub.creds")?,
            sys_creds: files("sys.creds")?,
            bootstrap_creds: files("bootstrap.creds")?,
            server_conf: files("nats-server.conf")?,
            tls: tls.ca.exists().then_some(tls),
        })
    }
}

/// The sealing key of ManagedServiceAccount tokens: kept when there is one (`--force` starts
/// the accounts over, but the stored tokens stay readable), made otherwise.
fn keep_sealing_key(dir: &Path) -> Result<(), SetupError> {
    let sealing = dir.join(crate::sealing::SEALING_KEY_FILE);
    crate::sealing::load_or_create(&sealing).map_err(|e| SetupError::Invalid {
        path: sealing.clone(),
        message: e.to_string(),
    })?;
    Ok(())
}

/// Writes each account's and the operator's seed, private, as `keys/<name>`.
fn write_seeds(keys: &Path, seeds: &[(&str, &KeyPair)]) -> Result<(), SetupError> {
    for (name, key) in seeds {
        let path = keys.join(name);
        let seed = key.seed().map_err(|e| SetupError::Crypto(e.to_string()))?;
        write_private(&path, format!("{seed}\n").as_bytes()).map_err(io(&path))?;
    }
    Ok(())
}

/// Writes the first users' credentials of a new directory: the hub's, the fleet's bootstrap user
/// and the system user the hub pushes account updates with. the two pairs are each
/// account's signing key and public key.
fn write_first_creds(
    dir: &Path,
    now: i64,
    (account_signing, account_pub): (&KeyPair, &str),
    (agents_signing, agents_pub): (&KeyPair, &str),
    system: &KeyPair,
) -> Result<(), SetupError> {
    let user_creds = |name: &str, nats: User, signer: &KeyPair, issuer_account: &str| {
        user_creds(name, nats, signer, issuer_account, now)
    };
    for (file, creds) in [
        (
            "hub.creds",
            user_creds(
                "flotilla-hub",
                permissions::hub(),
                account_signing,
                account_pub,
            )?,
        ),
        (
            "bootstrap.creds",
            user_creds(
                "flotilla-bootstrap",
                permissions::bootstrap(),
                agents_signing,
                agents_pub,
            )?,
        ),
        (
            "sys.creds",
            user_creds(
                "flotilla-sys",
                permissions::hub(),
                system,
                &system.public_key(),
            )?,
        ),
    ] {
        let path = dir.join(file);
        write_private(&path, creds.format().expose().as_bytes()).map_err(io(&path))?;
    }
    Ok(())
}

/// Replacing a setup: the old revocations and resolver store belong to the old keys.
fn remove_stale(dir: &Path) -> Result<(), SetupError> {
    for stale in [dir.join("revocations.json"), dir.join("jwt")] {
        let removed = if stale.is_dir() {
            std::fs::remove_dir_all(&stale)
        } else {
            std::fs::remove_file(&stale)
        };
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(SetupError::Io {
                    path: stale,
                    source: e,
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Signs a new user's credentials: a fresh NKey pair and a JWT for it, signed by `signer` (an
/// account or one of its signing keys) for `issuer_account`.
pub fn user_creds(
    name: &str,
    mut nats: User,
    signer: &KeyPair,
    issuer_account: &str,
    now: i64,
) -> Result<Creds, SetupError> {
    let user = KeyPair::new_user();
    if signer.public_key() != issuer_account {
        nats.issuer_account = issuer_account.to_string();
    }
    let jwt = Claims::new(name, user.public_key(), now, nats)
        .encode(signer)
        .map_err(|e| SetupError::Crypto(e.to_string()))?;
    Ok(Creds {
        jwt,
        seed: Secret::new(user.seed().map_err(|e| SetupError::Crypto(e.to_string()))?),
    })
}

/// Reads `operator.jwt` and checks it lists the operator signing key the hub holds.
fn read_operator(dir: &Path, operator_signing: &KeyPair) -> Result<Claims<Operator>, SetupError> {
    let (jwt, path) = read_jwt(dir, "operator.jwt")?;
    let operator = Claims::<Operator>::decode_operator(&jwt)
        .map_err(|e| invalid(&path, format!("operator JWT: {e}")))?;
    if !operator
        .nats
        .signing_keys
        .contains(&operator_signing.public_key())
    {
        return Err(invalid(
            &path,
            "does not list keys/operator-signing.nk among its signing keys".into(),
        ));
    }
    Ok(operator)
}

/// Checks that an account JWT of `dir` and the keys the hub signs with belong together: the
/// JWT is the account's, signed by the operator, and lists the account signing key. A mix of two
/// directories fails here, naming the file, rather than as refused connections later.
fn check_account(
    dir: &Path,
    file: &str,
    operator: &Claims<Operator>,
    account: &str,
    signing: &KeyPair,
) -> Result<Claims<Account>, SetupError> {
    let (jwt, path) = read_jwt(dir, file)?;
    let claims = Claims::<Account>::decode_account(&jwt, operator)
        .map_err(|e| invalid(&path, format!("account JWT: {e}")))?;
    if claims.sub != account {
        return Err(invalid(
            &path,
            format!("is about {}, not the key in keys/ ({account})", claims.sub),
        ));
    }
    if !claims.nats.signing_keys.contains(&signing.public_key()) {
        return Err(invalid(
            &path,
            "does not list the account's signing key in keys/ among its signing keys".into(),
        ));
    }
    Ok(claims)
}

fn read_jwt(dir: &Path, name: &str) -> Result<(String, PathBuf), SetupError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path)
        .map(|t| (t.trim().to_string(), path.clone()))
        .map_err(io(&path))
}

fn invalid(path: &Path, message: String) -> SetupError {
    SetupError::Invalid {
        path: path.to_path_buf(),
        message,
    }
}

/// The hub account's claims at `iat`: JetStream within the configured limits, the hub's signing
/// key, the spoke-facing subjects exported to the agents' account and the proxy imported from it.
pub fn hub_account_claims(
    account: &str,
    signing_key: &str,
    agents: &str,
    options: &InitOptions,
    iat: i64,
) -> Claims<Account> {
    let limits = AccountLimits {
        disk_storage: options.jetstream_max_bytes,
        mem_storage: options.jetstream_max_memory,
        ..AccountLimits::unlimited_with_jetstream()
    };
    let mut nats = Account::new(limits, vec![signing_key.to_string()]);
    nats.exports = permissions::hub_exports();
    nats.imports = permissions::hub_imports(agents);
    Claims::new(ACCOUNT_NAME, account, iat, nats)
}

/// The agents account's claims at `iat`: no JetStream, messages no larger than an event, the
/// hub's subjects imported and the proxy exported.
pub fn agents_account_claims(
    agents: &str,
    signing_key: &str,
    hub: &str,
    options: &InitOptions,
    iat: i64,
) -> Claims<Account> {
    let limits = AccountLimits {
        payload: permissions::AGENT_MAX_PAYLOAD,
        conn: options.agents_max_connections,
        ..AccountLimits::unlimited()
    };
    let mut nats = Account::new(limits, vec![signing_key.to_string()]);
    nats.exports = permissions::agents_exports();
    nats.imports = permissions::agents_imports(hub);
    Claims::new(AGENTS_ACCOUNT_NAME, agents, iat, nats)
}

fn quote(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

fn server_conf(
    dir: &Path,
    listen: &str,
    system_account: &str,
    preload: &[(&str, &str)],
    tls: Option<&TlsFiles>,
) -> String {
    let mut out = format!(
        "# Flotilla NATS server, operator mode. Written by flotilla-hub init; run with\n\
         #   nats-server -c {conf}\n\
         # Accounts are resolved from jwt/ (the hub pushes revocations there through the system\n\
         # account); the two accounts below are preloaded.\n\
         listen: {listen:?}\n\
         operator: {operator}\n\
         system_account: {system_account}\n\
         resolver: {{\n  type: full\n  dir: {jwt}\n  allow_delete: false\n  interval: \"2m\"\n}}\n\
         resolver_preload: {{\n",
        conf = dir.join("nats-server.conf").display(),
        operator = quote(&dir.join("operator.jwt")),
        jwt = quote(&dir.join("jwt")),
    );
    for (key, jwt) in preload {
        out.push_str(&format!("  {key}: {jwt:?}\n"));
    }
    out.push_str(&format!(
        "}}\njetstream: {{\n  store_dir: {}\n}}\n",
        quote(&dir.join("jetstream"))
    ));
    if let Some(t) = tls {
        out.push_str(&format!(
            "tls: {{\n  cert_file: {}\n  key_file: {}\n  ca_file: {}\n  timeout: 5\n",
            quote(&t.server_cert),
            quote(&t.server_key),
            quote(&t.ca)
        ));
        if t.handshake_first {
            // nats-server 2.10.4 and later; 2.9 refuses the setting at start.
            out.push_str(&format!("  {HANDSHAKE_FIRST}\n"));
        }
        out.push_str("}\n");
    }
    out
}

/// How long the server and client certificates `init` writes are valid.
pub const CERT_DAYS: i64 = 397;
/// How long the CA `init` writes is valid.
pub const CA_DAYS: i64 = 3650;

fn write_tls(files: &TlsFiles, listen: &str, extra: &[String]) -> Result<(), SetupError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
        KeyPair as TlsKey,
    };
    let dir = files.ca.parent().unwrap_or(Path::new("."));
    create_private_dir(dir).map_err(io(dir))?;
    let crypto = |e: rcgen::Error| SetupError::Crypto(format!("TLS: {e}"));
    let now = time::OffsetDateTime::now_utc();
    let valid = |params: &mut CertificateParams, days: i64| {
        // A little slack before now for clocks a few minutes behind.
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(days);
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(crypto)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Flotilla CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    valid(&mut ca_params, CA_DAYS);
    let ca_key = TlsKey::generate().map_err(crypto)?;
    let ca = ca_params.self_signed(&ca_key).map_err(crypto)?;
    // Kept (0600) so that certificates can be issued again before they expire.
    write_private(&files.ca_key, ca_key.serialize_pem().as_bytes()).map_err(io(&files.ca_key))?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let host = listen
        .rsplit_once(':')
        .map(|(h, _)| h.trim_matches(['[', ']']))
        .unwrap_or(listen);
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    for h in std::iter::once(host.to_string()).chain(extra.iter().cloned()) {
        if !h.is_empty() && h != "0.0.0.0" && !names.contains(&h) {
            names.push(h);
        }
    }
    let server_key = TlsKey::generate().map_err(crypto)?;
    let mut server_params = CertificateParams::new(names).map_err(crypto)?;
    // Each certificate is good for its one role: the server's cannot act as a client, the
    // client's cannot serve.
    server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    valid(&mut server_params, CERT_DAYS);
    let server = server_params
        .signed_by(&server_key, &issuer)
        .map_err(crypto)?;
    let client_key = TlsKey::generate().map_err(crypto)?;
    let mut client_params =
        CertificateParams::new(vec!["flotilla-client".to_string()]).map_err(crypto)?;
    client_params
        .distinguished_name
        .push(DnType::CommonName, "flotilla-client");
    client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    valid(&mut client_params, CERT_DAYS);
    let client = client_params
        .signed_by(&client_key, &issuer)
        .map_err(crypto)?;
    write_public(&files.ca, ca.pem().as_bytes()).map_err(io(&files.ca))?;
    write_public(&files.server_cert, server.pem().as_bytes()).map_err(io(&files.server_cert))?;
    write_private(&files.server_key, server_key.serialize_pem().as_bytes())
        .map_err(io(&files.server_key))?;
    write_public(&files.client_cert, client.pem().as_bytes()).map_err(io(&files.client_cert))?;
    write_private(&files.client_key, client_key.serialize_pem().as_bytes())
        .map_err(io(&files.client_key))?;
    Ok(())
}
