//! Run outputs.
