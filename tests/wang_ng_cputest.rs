//! Wang & Ng (seed 003): ground truth for the cputest instrument (issue 25).
