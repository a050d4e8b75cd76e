use super::*;

#[derive(Clone, Debug, PartialEq)]
struct Token(&'static str);
#[derive(Clone, Debug, PartialEq)]
struct Other(&'static str);

#[test]
fn provided_handles_are_found_by_type() {
    let mut p = Provided::default();
    assert_eq!(p.get::<Token>(), None);
    p.insert(Token("a"));
    p.insert(Other("b"));
    assert_eq!(p.get::<Token>(), Some(Token("a")));
    assert_eq!(p.get::<Other>(), Some(Other("b")));
    p.insert(Token("c"));
    assert_eq!(
        p.get::<Token>(),
        Some(Token("c")),
        "a later one replaces it"
    );
}
