//! Wang & Ng (seed 003): ground truth for the rtt instrument (issue 25).
