use super::*;

fn user_claims() -> Claims<User> {
    let user = KeyPair::new_user();
    Claims::new(
        "edge-1",
        user.public_key(),
        1_700_000_000,
        User::new(
            Permission {
                allow: vec!["flotilla.status.3.edge-1.>".into()],
                deny: vec![],
            },
            Permission::default(),
        ),
    )
}

#[test]
fn a_signed_jwt_decodes_and_verifies() {
    let account = KeyPair::new_account();
    let mut claims = user_claims();
    claims.exp = Some(1_700_003_600);
    let jwt = claims.clone().encode(&account).unwrap();
    let back = Claims::<User>::decode(&jwt).unwrap();
    assert_eq!(back.iss, account.public_key());
    assert_eq!(back.sub, claims.sub);
    assert_eq!(back.exp, Some(1_700_003_600));
    assert_eq!(back.nats, claims.nats);
    assert_eq!(back.jti.len(), 52, "base32 of a SHA-256");
}

#[test]
fn the_wire_shape_is_what_nats_servers_read() {
    let account = KeyPair::new_account();
    let jwt = user_claims().encode(&account).unwrap();
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3);
    let header = BASE64URL_NOPAD.decode(parts[0].as_bytes()).unwrap();
    assert_eq!(header, HEADER.as_bytes());
    let claims: serde_json::Value =
        serde_json::from_slice(&BASE64URL_NOPAD.decode(parts[1].as_bytes()).unwrap()).unwrap();
    assert_eq!(claims["nats"]["type"], "user");
    assert_eq!(claims["nats"]["version"], 2);
    assert_eq!(
        claims["nats"]["pub"]["allow"][0],
        "flotilla.status.3.edge-1.>"
    );
    assert!(claims["nats"].get("resp").is_none());
}

#[test]
fn a_tampered_jwt_does_not_verify() {
    let account = KeyPair::new_account();
    let jwt = user_claims().encode(&account).unwrap();
    let parts: Vec<&str> = jwt.split('.').collect();
    let mut claims: serde_json::Value =
        serde_json::from_slice(&BASE64URL_NOPAD.decode(parts[1].as_bytes()).unwrap()).unwrap();
    claims["nats"]["pub"]["allow"][0] = ">".into();
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        BASE64URL_NOPAD.encode(&serde_json::to_vec(&claims).unwrap()),
        parts[2]
    );
    assert!(matches!(
        Claims::<User>::decode(&forged),
        Err(JwtError::Signature(_))
    ));
}

#[test]
fn a_jwt_of_another_kind_is_refused() {
    let operator = KeyPair::new_operator();
    let account = KeyPair::new_account();
    let jwt = Claims::new(
        "flotilla",
        account.public_key(),
        1,
        Account::new(AccountLimits::unlimited_with_jetstream(), vec![]),
    )
    .encode(&operator)
    .unwrap();
    let err = Claims::<User>::decode(&jwt).unwrap_err();
    assert!(
        err.to_string().contains(r#"type "account", want "user""#),
        "{err}"
    );
    assert!(matches!(
        Claims::<User>::decode("a.b"),
        Err(JwtError::Malformed(_))
    ));
}
