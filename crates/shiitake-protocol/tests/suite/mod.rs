//! One module per capability, named for the behaviour it tests.

mod addresses;
mod bounds;
mod codecs;
mod contract;
mod fixtures;
mod round_trip;
