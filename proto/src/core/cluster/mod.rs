//! What the core does with the cluster's parts on each input: the handlers
//! of peer messages and ticks. The parts themselves, each owning its data,
//! are in [`crate::cluster`], which never sees the core.

mod election;
mod follower;
mod handover;
mod home;
mod late;
mod leader;
mod links;
mod persist;
mod probe;
mod progress;
mod regain;
mod status;
#[cfg(test)]
mod testing;
mod tx;
mod txhome;
mod view;
mod vouch;

pub(crate) use leader::Decide;
pub(crate) use links::To;
pub(crate) use status::NotReady;
