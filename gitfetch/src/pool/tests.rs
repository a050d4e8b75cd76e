use super::*;

fn set(items: &[&str]) -> HashSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn hosts_are_the_authority_without_user_info() {
    assert_eq!(
        host_of("git://Git.Example.com:9418/ops/shop.git"),
        "git.example.com:9418"
    );
    assert_eq!(host_of("https://ann@git.example.com/x"), "git.example.com");
    assert_eq!(host_of("file:///srv/git/shop"), "");
}

#[test]
fn jobs_start_in_order_one_per_host_and_gitrepo_within_the_free_slots() {
    let queued = [("a", "h1"), ("b", "h1"), ("c", "h2"), ("d", "h3")];
    assert_eq!(startable(&queued, &set(&[]), &set(&[]), 2), [0, 2]);
    assert_eq!(startable(&queued, &set(&[]), &set(&["h1"]), 2), [2, 3]);
    assert_eq!(startable(&queued, &set(&["c"]), &set(&["h9"]), 5), [0, 3]);
    assert_eq!(
        startable(&queued, &set(&[]), &set(&[]), 0),
        Vec::<usize>::new()
    );
}
