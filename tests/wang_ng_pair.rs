//! Wang & Ng (seed 003): ground truth for the pair instrument (issue 25).
