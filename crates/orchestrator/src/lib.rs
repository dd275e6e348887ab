//! Orchestrator of nnb: experiments as code and the machinery that runs them.
//!
//! The typed job protocol ([`jobs`]) is what a controller asks of an agent; the
//! agent ([`agent`]) serves it over HTTP/JSON and runs each job on plain threads
//! through `nnb_burn` / `nnb_netlat`; the client ([`client`]) talks to one agent;
//! providers ([`provider`]) bring up a fleet of agents and take it down. Experiment
//! files, plans, the controller and the result store build on them; they sit behind
//! the `controller` feature, so the node-side agent builds without them.

pub mod agent;
#[cfg(feature = "controller")]
pub mod budget;
#[cfg(feature = "controller")]
pub mod client;
#[cfg(feature = "controller")]
pub mod controller;
#[cfg(feature = "controller")]
pub mod experiment;
pub mod jobs;
#[cfg(feature = "controller")]
pub mod journal;
#[cfg(feature = "controller")]
mod lockfile;
#[cfg(feature = "controller")]
pub mod plan;
#[cfg(feature = "controller")]
pub mod progress;
#[cfg(feature = "controller")]
pub mod provider;
#[cfg(feature = "controller")]
pub mod results;
#[cfg(feature = "controller")]
pub mod tenant;
