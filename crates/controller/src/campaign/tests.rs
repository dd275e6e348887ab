//! Unit tests of campaigns.
