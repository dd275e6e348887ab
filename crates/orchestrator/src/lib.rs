//! Orchestrator of nnb: experiments as code and the machinery that runs them.
//!
//! The typed job protocol ([`jobs`]) is what a controller asks of an agent; the
//! agent ([`agent`]) serves it over HTTP/JSON and runs each job on plain threads
//! through `nnb_burn` / `nnb_netlat`; the client ([`client`]) talks to one agent;
//! providers ([`provider`]) bring up a fleet of agents and take it down. Experiment
//! files, plans, the controller and the result store build on them.

pub mod agent;
pub mod budget;
pub mod client;
pub mod controller;
pub mod experiment;
pub mod jobs;
pub mod journal;
pub mod plan;
pub mod progress;
pub mod provider;
pub mod results;
pub mod tenant;
