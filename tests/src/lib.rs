//! Helpers shared by snaplock's integration tests and load tools.
pub mod line_conn;
pub mod procfs;
pub mod sim;
pub mod txmodel;
