//! The one way to read a paged list: ask for pages from the empty token until a page comes back
//! without a next one.

use anyhow::Result;
use flotilla_api::v1::{
    ListClustersResponse, ListWorksResponse, ManagedCluster, ManifestWork, PolicyDetails,
    PolicyStatusReport,
};
use std::future::Future;

/// A page of a paged list.
pub trait Page {
    /// What the list holds.
    type Item;
    /// The page's items and the token of the next page ("" after the last page).
    fn into_parts(self) -> (Vec<Self::Item>, String);
}

impl Page for ListClustersResponse {
    type Item = ManagedCluster;

    fn into_parts(self) -> (Vec<ManagedCluster>, String) {
        (self.items, self.next_page_token)
    }
}

impl Page for ListWorksResponse {
    type Item = ManifestWork;

    fn into_parts(self) -> (Vec<ManifestWork>, String) {
        (self.items, self.next_page_token)
    }
}

impl Page for PolicyDetails {
    type Item = PolicyStatusReport;

    fn into_parts(self) -> (Vec<PolicyStatusReport>, String) {
        (self.clusters, self.next_page_token)
    }
}

/// Every item of a paged list, in page order: `fetch(page_token)` asks for one page.
pub async fn all<P, F, Fut>(mut fetch: F) -> Result<Vec<P::Item>>
where
    P: Page,
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<P>>,
{
    let mut items = Vec::new();
    let mut token = String::new();
    loop {
        let (page, next) = fetch(token).await?.into_parts();
        items.extend(page);
        if next.is_empty() {
            return Ok(items);
        }
        token = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::ObjectMeta;

    fn cluster(name: &str) -> ManagedCluster {
        ManagedCluster {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn pages_are_read_in_order_until_one_has_no_next_token() {
        let mut asked = Vec::new();
        let items = all(|token: String| {
            asked.push(token.clone());
            let page = match token.as_str() {
                "" => ListClustersResponse {
                    items: vec![cluster("a"), cluster("b")],
                    next_page_token: "b".into(),
                },
                _ => ListClustersResponse {
                    items: vec![cluster("c")],
                    next_page_token: String::new(),
                },
            };
            async move { Ok(page) }
        })
        .await
        .unwrap();
        let names: Vec<_> = items
            .iter()
            .map(|c| c.metadata.as_ref().unwrap().name.as_str())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(asked, ["", "b"]);
    }
}
