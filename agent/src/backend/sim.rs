//! A simulated cluster: fixed capacity, a version, and injectable health failures.

use super::{Backend, ClusterInfo};
use std::sync::Mutex;

/// An in-memory cluster.
pub struct SimBackend {
    info: Mutex<ClusterInfo>,
}

impl SimBackend {
    /// A healthy cluster with `cpu` cores and `memory_gib` GiB.
    pub fn new(cpu: u32, memory_gib: u32, kubernetes_version: &str) -> Self {
        let capacity: std::collections::HashMap<String, String> = [
            ("cpu".to_string(), cpu.to_string()),
            ("memory".to_string(), format!("{memory_gib}Gi")),
            ("pods".to_string(), "110".to_string()),
        ]
        .into();
        // Allocatable keeps some room for system daemons, like kubelet's reservations.
        let allocatable = [
            (
                "cpu".to_string(),
                format!("{}m", cpu * 1000 - cpu.min(4) * 100),
            ),
            (
                "memory".to_string(),
                format!("{}Mi", memory_gib * 1024 - memory_gib.min(8) * 128),
            ),
            ("pods".to_string(), "110".to_string()),
        ]
        .into();
        Self {
            info: Mutex::new(ClusterInfo {
                capacity,
                allocatable,
                kubernetes_version: kubernetes_version.to_string(),
                platform: "Other".into(),
                product: "Flotilla-Sim".into(),
                healthy: true,
                health_message: String::new(),
            }),
        }
    }

    /// Sets the platform claim value.
    pub fn with_platform(self, platform: &str) -> Self {
        self.info.lock().expect("sim lock").platform = platform.to_string();
        self
    }

    /// Injects (or clears) a control-plane failure.
    pub fn set_health(&self, healthy: bool, message: &str) {
        let mut info = self.info.lock().expect("sim lock");
        info.healthy = healthy;
        info.health_message = message.to_string();
    }

    /// Changes allocatable CPU (simulates load).
    pub fn set_allocatable(&self, resource: &str, value: &str) {
        self.info
            .lock()
            .expect("sim lock")
            .allocatable
            .insert(resource.to_string(), value.to_string());
    }
}

impl Backend for SimBackend {
    fn info(&self) -> ClusterInfo {
        self.info.lock().expect("sim lock").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_reports_capacity_and_injected_failures() {
        let b = SimBackend::new(8, 32, "v1.30.0").with_platform("AWS");
        let i = b.info();
        assert_eq!(i.capacity["cpu"], "8");
        assert_eq!(i.capacity["memory"], "32Gi");
        assert_eq!(i.allocatable["cpu"], "7600m");
        assert_eq!(i.platform, "AWS");
        assert!(i.healthy);
        b.set_health(false, "apiserver down");
        assert!(!b.info().healthy);
    }
}
