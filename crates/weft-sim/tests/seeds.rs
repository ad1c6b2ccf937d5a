//! Runs the simulator over many seeds: `WEFT_SIM_SEEDS=n` sets how many (default 300),
//! `WEFT_SIM_SEED=s` replays one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

// Proves every seed passes the checkers — under crashes, quick restarts, partitions and
// graceful leaves (draining, or frozen on the route they had): no acknowledged write lost, one agreed stable
// topology with full owner counts once faults heal, every key's history linearizable, and
// listeners that saw each acknowledged write once, in order.
#[test]
fn hundreds_of_seeds_pass_the_checkers() {
    let seeds: Vec<u64> = match std::env::var("WEFT_SIM_SEED") {
        Ok(seed) => vec![seed.parse().expect("WEFT_SIM_SEED is a number")],
        Err(_) => {
            let count = std::env::var("WEFT_SIM_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(300u64);
            (0..count).collect()
        }
    };
    let mut total = weft_sim::Stats::default();
    for seed in &seeds {
        match weft_sim::run_seed(*seed) {
            Ok(stats) => {
                total.acknowledged += stats.acknowledged;
                total.unanswered += stats.unanswered;
                total.reads += stats.reads;
                total.unanswered_reads += stats.unanswered_reads;
                total.crashes += stats.crashes;
                total.quick_restarts += stats.quick_restarts;
                total.partitions += stats.partitions;
                total.leaves += stats.leaves;
            }
            Err(failure) => panic!("{failure}"),
        }
    }
    eprintln!(
        "{} seeds: {} writes acknowledged, {} unanswered; {} reads answered, {} unanswered; {} crashes ({} restarted at once), {} partitions, {} graceful leaves",
        seeds.len(),
        total.acknowledged,
        total.unanswered,
        total.reads,
        total.unanswered_reads,
        total.crashes,
        total.quick_restarts,
        total.partitions,
        total.leaves
    );
    assert!(total.reads > 0, "no read was answered");
    assert!(
        total.crashes > 0 && total.quick_restarts > 0 && total.partitions > 0 && total.leaves > 0,
        "no faults were injected"
    );
}
