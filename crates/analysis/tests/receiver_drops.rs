//! Issue 27 item 1 (review item 38): a level whose receiver dropped datagrams is
//! flagged, never counted silently as the network's loss. The load-steps fixture
//! with the sink's own drops (`sink_drops`, version 9) put in by hand: at
//! `load=100M` neighbor-2's first repetition had 1500 dropped and neighbor-3's second
//! 700 (the others 0); `load=50M` comes from a sink that did not count (null).

use nnb_analysis::read::read_run;
use nnb_analysis::tables::{findings, throughput, Analyses};
use serde_json::json;

use crate::fixture::copied;

#[test]
fn a_level_whose_receiver_dropped_is_flagged_in_the_verdict_and_the_throughput_table() {
    let dir = copied(
        "throughput-m5",
        |_| {},
        |r| {
            if r["job"] != "load" {
                return;
            }
            let drops = match (r["step"].as_str().unwrap(), r["tenant"].as_str().unwrap()) {
                ("load/load=100M/rep=1", "neighbor-2") => json!(1500),
                ("load/load=100M/rep=2", "neighbor-3") => json!(700),
                (s, _) if s.starts_with("load/load=100M/") => json!(0),
                _ => json!(null),
            };
            r["sink_drops"] = drops;
        },
    );
    let run = read_run(dir.path()).unwrap();
    let f = findings(&run, &Analyses::of(&run).unwrap()).unwrap();
    let receiver: Vec<&String> = f.iter().filter(|x| x.contains("receiver")).collect();
    assert_eq!(
        receiver,
        [
            "the receiver dropped 1500 datagrams at load/load=100M (the most of its 2 load \
             record(s) with drops; a buffer of datagrams coalesced on receive counts once): \
             this level's loss is the endpoint's, not the network's"
        ],
        "{f:?}"
    );
    let t = throughput(&run).unwrap().unwrap().table();
    let flagged: Vec<&String> = t.notes.iter().filter(|n| n.contains("receiver")).collect();
    assert_eq!(flagged.len(), 1, "{:?}", t.notes);
    assert!(flagged[0].starts_with("the receiver dropped 1500 datagrams at load=100M"));
}
