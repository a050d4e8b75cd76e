use super::*;

/// A `/proc/<pid>/stat` line of `name` in `state` with `utime`, `stime` and `start`.
fn line(name: &str, state: &str, utime: u64, stime: u64, start: u64) -> String {
    // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    // stime cutime cstime priority nice threads itrealvalue starttime vsize ...
    format!(
        "4242 ({name}) {state} 1 4242 4242 0 -1 4194560 900 0 3 0 {utime} {stime} 7 8 20 0 12 0 \
         {start} 123456789 2048 18446744073709551615"
    )
}

fn stat(ticks: u64, start_time: u64, zombie: bool) -> Option<Stat> {
    Some(Stat {
        ticks,
        start_time,
        zombie,
    })
}

#[test]
fn a_stat_line_gives_user_plus_system_ticks_and_the_start_time() {
    let s = parse_stat(&line("flotilla-hub", "S", 150, 50, 9000)).unwrap();
    assert_eq!(s, stat(200, 9000, false).unwrap());
    // Children's times (cutime, cstime) are not the process's.
    assert_eq!(s.ticks, 200);
}

#[test]
fn a_name_with_spaces_and_parentheses_does_not_shift_the_fields() {
    let s = parse_stat(&line("nats) (server x", "Z", 3, 4, 77)).unwrap();
    assert_eq!(s, stat(7, 77, true).unwrap());
    assert_eq!(parse_stat("4242 (cut short) S 1 2"), None);
    assert_eq!(parse_stat(""), None);
}

#[test]
fn a_zombie_reading_is_final_and_a_reused_pid_is_not_the_process() {
    let mut hub = Tracked::new(Role::Hub, 10, stat(100, 5, false).unwrap());
    hub.observe(stat(140, 5, false));
    assert_eq!((hub.ticks, hub.ended), (140, false));
    hub.observe(stat(150, 5, true));
    assert_eq!(
        (hub.ticks, hub.ended),
        (150, true),
        "killed, read before reaping"
    );
    hub.observe(stat(9, 5, false));
    assert_eq!(hub.ticks, 150, "nothing after the final reading");

    let mut leaf = Tracked::new(Role::Leaf, 11, stat(30, 6, false).unwrap());
    leaf.observe(stat(2, 900, false));
    assert_eq!(
        (leaf.ticks, leaf.ended),
        (30, true),
        "another process got the pid"
    );
    let mut sim = Tracked::new(Role::Simulator, 12, stat(30, 6, false).unwrap());
    sim.observe(None);
    assert_eq!(
        (sim.ticks, sim.ended),
        (30, true),
        "gone: its last reading stands"
    );
}

#[test]
fn a_phase_counts_what_each_role_used_in_it_across_restarts() {
    let tracked = |role, pid, ticks, ended| Tracked {
        role,
        pid,
        start_time: 1,
        ticks,
        ended,
    };
    // At the start: the first hub, the JetStream server, two leaves; a simulator that exited
    // before the phase.
    let mut processes = vec![
        tracked(Role::Hub, 1, 1_000, false),
        tracked(Role::JetStream, 2, 500, false),
        tracked(Role::Leaf, 3, 100, false),
        tracked(Role::Leaf, 4, 100, false),
        tracked(Role::Simulator, 5, 70, true),
        tracked(Role::Driver, 6, 40, false),
    ];
    let begin = Totals::of(&processes);
    // During it: the hub killed at 1,250 ticks and restarted (the new one used 300), the server
    // used 200 more, each leaf 50, the driver 60.
    processes[0] = tracked(Role::Hub, 1, 1_250, true);
    processes.push(tracked(Role::Hub, 7, 300, false));
    processes[1].ticks = 700;
    processes[2].ticks = 150;
    processes[3].ticks = 150;
    processes[5].ticks = 100;
    let end = Totals::of(&processes);
    let u = usage(&begin, &end, 100, 1_000);
    assert_eq!(
        u.cpu_hub_s,
        Some(5.5),
        "250 ticks of the killed hub + 300 of the new one"
    );
    assert_eq!(u.cpu_jetstream_s, Some(2.0));
    assert_eq!(u.cpu_control_plane_s, Some(7.5));
    assert_eq!(u.cpu_control_plane_ms_per_cluster, Some(7.5));
    assert_eq!(u.cpu_leaves_s, Some(1.0));
    assert_eq!(u.cpu_simulators_s, Some(0.0), "exited before the phase");
    assert_eq!(u.cpu_driver_s, Some(0.6));
}

#[test]
fn unknown_roles_are_null_and_no_cluster_gives_no_per_cluster_figure() {
    // Attached to a hub given by pid: no JetStream server, no leaves, no simulators known.
    let processes = [Tracked {
        role: Role::Hub,
        pid: 1,
        start_time: 1,
        ticks: 250,
        ended: false,
    }];
    let u = usage(&Totals::default(), &Totals::of(&processes), 250, 10);
    assert_eq!(u.cpu_hub_s, Some(1.0));
    assert_eq!(u.cpu_jetstream_s, None);
    assert_eq!(
        u.cpu_control_plane_s, None,
        "the control plane is hub + JetStream"
    );
    assert_eq!(u.cpu_control_plane_ms_per_cluster, None);
    assert_eq!((u.cpu_leaves_s, u.cpu_simulators_s), (None, None));
    assert_eq!(ms_per_cluster(2.0, 0), None);
    assert_eq!(ms_per_cluster(2.5, 10_000), Some(0.25));
    assert_eq!(ms_per_cluster(0.001, 3), Some(0.333), "to the microsecond");
}

#[test]
fn the_summary_fields_are_named_as_documented() {
    let v = serde_json::to_value(CpuUsage::default()).unwrap();
    for key in [
        "cpu_hub_s",
        "cpu_jetstream_s",
        "cpu_leaves_s",
        "cpu_control_plane_s",
        "cpu_control_plane_ms_per_cluster",
        "cpu_simulators_s",
        "cpu_driver_s",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
}
