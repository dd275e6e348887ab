//! Wang & Ng (seed 003): ground truth for the badabing instrument (issue 25).
