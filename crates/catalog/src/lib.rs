//! The EC2 instance catalog: what a dedicated host of each family holds and costs.
