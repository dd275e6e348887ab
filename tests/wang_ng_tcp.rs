//! Wang & Ng (seed 003): ground truth for the tcp instrument (issue 25).
