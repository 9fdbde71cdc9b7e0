//! Operation sequences on the timing-wheel core against a reference model;
//! the harness is `src/wheel/fuzz.rs` in the crate.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tiered_timer::__fuzz::run(data);
});
