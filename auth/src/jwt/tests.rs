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

#[test]
fn the_issuer_must_be_the_expected_one() {
    let account = KeyPair::new_account();
    let signing = KeyPair::new_account();
    let stranger = KeyPair::new_account();
    let signing_keys = vec![signing.public_key()];
    let now = 1_700_000_000;

    // Signed by the account itself.
    let own = user_claims().encode(&account).unwrap();
    Claims::<User>::decode_user(&own, &account.public_key(), &signing_keys, now).unwrap();

    // Signed by its signing key, naming the account.
    let mut claims = user_claims();
    claims.nats.issuer_account = account.public_key();
    let delegated = claims.clone().encode(&signing).unwrap();
    Claims::<User>::decode_user(&delegated, &account.public_key(), &signing_keys, now).unwrap();

    // Signed by a key the account does not list.
    let forged = claims.encode(&stranger).unwrap();
    let err = Claims::<User>::decode_user(&forged, &account.public_key(), &signing_keys, now)
        .unwrap_err();
    assert!(matches!(err, JwtError::Issuer { .. }), "{err}");
    assert!(err.to_string().contains(&stranger.public_key()), "{err}");

    // Signed by the signing key without naming the account.
    let anonymous = user_claims().encode(&signing).unwrap();
    let err = Claims::<User>::decode_user(&anonymous, &account.public_key(), &signing_keys, now)
        .unwrap_err();
    assert!(matches!(err, JwtError::IssuerAccount { .. }), "{err}");
}

#[test]
fn expiry_is_checked() {
    let account = KeyPair::new_account();
    let mut claims = user_claims();
    claims.exp = Some(1_700_000_100);
    let jwt = claims.encode(&account).unwrap();
    let back = Claims::<User>::decode(&jwt).unwrap();
    back.check_expiry(1_700_000_099).unwrap();
    let err = back.check_expiry(1_700_000_100).unwrap_err();
    assert!(err.to_string().contains("expired at 1700000100"), "{err}");
    let err =
        Claims::<User>::decode_user(&jwt, &account.public_key(), &[], 1_700_000_200).unwrap_err();
    assert!(matches!(err, JwtError::Expired { .. }), "{err}");
    assert!(
        user_claims().check_expiry(i64::MAX).is_ok(),
        "no exp, no expiry"
    );
}

#[test]
fn operator_and_account_chain() {
    let operator = KeyPair::new_operator();
    let op_signing = KeyPair::new_operator();
    let account = KeyPair::new_account();
    let op_jwt = Claims::new(
        "op",
        operator.public_key(),
        1,
        Operator::new(vec![op_signing.public_key()], String::new()),
    )
    .encode(&operator)
    .unwrap();
    let op = Claims::<Operator>::decode_operator(&op_jwt).unwrap();
    let acc = || {
        Claims::new(
            "flotilla",
            account.public_key(),
            1,
            Account::new(AccountLimits::unlimited_with_jetstream(), vec![]),
        )
    };
    let by_signing = acc().encode(&op_signing).unwrap();
    let back = Claims::<Account>::decode_account(&by_signing, &op).unwrap();
    assert_eq!(back.nats.limits.streams, -1);
    let by_stranger = acc().encode(&KeyPair::new_operator()).unwrap();
    assert!(matches!(
        Claims::<Account>::decode_account(&by_stranger, &op),
        Err(JwtError::Issuer { .. })
    ));
    // An operator JWT signed by another operator is not self-signed.
    let not_self = Claims::new(
        "op",
        operator.public_key(),
        1,
        Operator::new(vec![], String::new()),
    )
    .encode(&op_signing)
    .unwrap();
    assert!(matches!(
        Claims::<Operator>::decode_operator(&not_self),
        Err(JwtError::Issuer { .. })
    ));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn subject() -> impl Strategy<Value = String> {
        prop::collection::vec("[a-z0-9_-]{1,8}|\\*", 1..5).prop_map(|tokens| tokens.join("."))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the permissions, a JWT decodes to what was signed, and changing any byte of
        /// its claims breaks it.
        #[test]
        fn round_trip_and_tamper(
            publish in prop::collection::vec(subject(), 0..4),
            subscribe in prop::collection::vec(subject(), 0..4),
            iat in 0i64..4_000_000_000,
            ttl in prop::option::of(1i64..1_000_000),
            name in "[ -~]{0,20}",
            flip in any::<prop::sample::Index>(),
        ) {
            let account = KeyPair::new_account();
            let user = KeyPair::new_user();
            let mut claims = Claims::new(
                name,
                user.public_key(),
                iat,
                User::new(
                    Permission { allow: publish, deny: vec![] },
                    Permission { allow: vec![], deny: subscribe },
                ),
            );
            claims.exp = ttl.map(|t| iat + t);
            let jwt = claims.clone().encode(&account).unwrap();
            let back = Claims::<User>::decode_from(&jwt, &[&account.public_key()]).unwrap();
            prop_assert_eq!(&back.nats, &claims.nats);
            prop_assert_eq!(back.exp, claims.exp);
            prop_assert_eq!(&back.name, &claims.name);

            let parts: Vec<&str> = jwt.split('.').collect();
            let mut body = BASE64URL_NOPAD.decode(parts[1].as_bytes()).unwrap();
            let i = flip.index(body.len());
            body[i] ^= 0x01;
            let forged = format!("{}.{}.{}", parts[0], BASE64URL_NOPAD.encode(&body), parts[2]);
            prop_assert!(Claims::<User>::decode(&forged).is_err());
        }
    }
}
