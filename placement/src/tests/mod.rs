//! Cross-module tests: fixtures, the seed examples, scheduling behaviour and properties.

mod behaviour;
mod fixtures;
mod properties;
mod seeds;
