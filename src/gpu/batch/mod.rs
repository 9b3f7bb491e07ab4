//! Many systems on one device: a batch of worlds packed into one system (`pack`) and
//! stepped together by one recording ([`worlds::GpuWorlds`]).

mod check;
mod key;
pub(crate) mod pack;
pub mod worlds;
