//! The isolation matrix's timing keys (issue 28, seeds-coverage N13, N14): which of
//! a pair's two measured jobs starts first and how long before the other
//! (`start_order`, `stagger`), and how often the host reads the tenants' counters
//! (`usage_interval`), each checked where it is written.

use std::time::Duration;

use nnb_format::{StartOrder, StepStart};

use super::file::Spanned;
use super::{values, Checker, ExperimentError, DEFAULT_USAGE_INTERVAL};

/// The shortest host-side sampling interval: the sampling thread checks its stop
/// flag and wakes on its own timer, a few milliseconds apart at best.
pub(crate) const MIN_USAGE_INTERVAL: Duration = Duration::from_millis(5);
/// The longest: a second between readings already blurs a step of a few seconds.
pub(crate) const MAX_USAGE_INTERVAL: Duration = Duration::from_secs(1);
/// Readings a measured step's `duration` must hold at least, so that a rate over
/// it is not made of two or three points.
pub(crate) const MIN_READINGS: u32 = 10;

impl Checker<'_> {
    /// `start_order` and `stagger` of a matrix whose measured jobs last `duration`:
    /// together needs no stagger; a-first and b-first need one above 0 and below
    /// `duration` (the later job must start while the first still runs).
    pub(super) fn step_start(
        &self,
        order: &Option<Spanned<String>>,
        stagger: &Option<Spanned<String>>,
        duration: Duration,
    ) -> Result<StepStart, ExperimentError> {
        let names = || StartOrder::ALL.map(|o| format!("\"{o}\"")).join(", ");
        let order_at = match order {
            Some(v) => {
                let o = StartOrder::from_name(v.get_ref()).ok_or_else(|| {
                    self.error(
                        v.span(),
                        format!(
                            "unknown start_order `{}`: expected one of {}",
                            v.get_ref(),
                            names()
                        ),
                    )
                })?;
                Some((o, v.span()))
            }
            None => None,
        };
        let o = order_at.as_ref().map_or(StartOrder::Together, |(o, _)| *o);
        match (o, stagger, order_at) {
            (StartOrder::Together, None, _) => Ok(StepStart::default()),
            (StartOrder::Together, Some(v), _) => Err(self.error(
                v.span(),
                "a stagger needs start_order = \"a-first\" or \"b-first\" (\"together\", \
                 the default, starts both jobs at once)",
            )),
            (o, None, Some((_, span))) => Err(self.error(
                span,
                format!("start_order = \"{o}\" needs a stagger, e.g. stagger = \"500ms\""),
            )),
            (o, Some(v), _) => {
                let d = self.at(v, values::duration(v.get_ref()))?;
                let ms = nnb_units::millis(d);
                if ms == 0 {
                    return Err(self.error(
                        v.span(),
                        "a stagger is at least 1ms: for both jobs at once, use start_order = \
                         \"together\"",
                    ));
                }
                if d >= duration {
                    return Err(self.error(
                        v.span(),
                        format!(
                            "the stagger ({}) must be below the matrix's duration ({}): the \
                             later job would start after the first one ended",
                            nnb_units::format_duration(d),
                            nnb_units::format_duration(duration)
                        ),
                    ));
                }
                Ok(StepStart {
                    order: o,
                    stagger_ms: ms,
                })
            }
            // An order without its span is the default, together (matched above).
            (_, None, None) => Ok(StepStart::default()),
        }
    }

    /// `usage_interval` of a matrix whose measured jobs last `duration`: from
    /// [`MIN_USAGE_INTERVAL`] to [`MAX_USAGE_INTERVAL`], with at least
    /// [`MIN_READINGS`] readings per `duration`; default [`DEFAULT_USAGE_INTERVAL`].
    pub(super) fn usage_interval(
        &self,
        v: &Option<Spanned<String>>,
        duration: Duration,
    ) -> Result<Duration, ExperimentError> {
        let Some(v) = v else {
            return Ok(DEFAULT_USAGE_INTERVAL);
        };
        let d = self.at(v, values::duration(v.get_ref()))?;
        let show = nnb_units::format_duration;
        if !(MIN_USAGE_INTERVAL..=MAX_USAGE_INTERVAL).contains(&d) {
            return Err(self.error(
                v.span(),
                format!(
                    "usage_interval is {} to {}, got {}",
                    show(MIN_USAGE_INTERVAL),
                    show(MAX_USAGE_INTERVAL),
                    show(d)
                ),
            ));
        }
        if d * MIN_READINGS > duration {
            return Err(self.error(
                v.span(),
                format!(
                    "usage_interval {} leaves fewer than {MIN_READINGS} readings in the \
                     matrix's duration ({}): at most {}",
                    show(d),
                    show(duration),
                    show(duration / MIN_READINGS)
                ),
            ));
        }
        Ok(d)
    }
}

impl super::Experiment {
    /// How often the host reads the tenants' counters over a measured step: an
    /// isolation matrix's `usage_interval`, else [`DEFAULT_USAGE_INTERVAL`].
    pub fn usage_interval(&self) -> Duration {
        match &self.scenario {
            super::Scenario::IsolationMatrix(m) => m.usage_interval,
            _ => DEFAULT_USAGE_INTERVAL,
        }
    }
}
