//! The tenant API catalogue, one module per service group, in folders named
//! after the areas of the catalogue.

pub mod identity;
pub mod platform;
