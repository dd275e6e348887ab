//! Wang & Ng (seed 003): ground truth for the bursts instrument (issue 25).
