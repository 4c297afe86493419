// SPDX-License-Identifier: Apache-2.0 OR MIT
//! funcslower's output: BCC's banner and columns (`COMM PID LAT(ms) RVAL FUNC [ARGS]`, after `TIME` with -T or
//! -t), each event's stack frames under it with -U/-K, folded stacks only with -f, or JSON lines.

use std::io::Write;

use anyhow::Result;
use common::output::name::Name;
use common::output::stdout::{clock_hms, clock_rfc3339, Output};
use common::stacks::json::JsonStacks;
use common::stacks::{Frame, Stack, Style};
use serde::Serialize;

/// How the threshold was given: BCC prints latencies in that unit.
#[derive(Debug, Clone, Copy)]
pub struct Threshold {
    /// "ms" or "us".
    pub unit: &'static str,
    /// The value as given (fractions allowed).
    pub value: f64,
}

impl Threshold {
    pub fn ns_per_unit(self) -> f64 {
        if self.unit == "us" {
            1e3
        } else {
            1e6
        }
    }

    pub fn min_ns(self) -> u64 {
        (self.value * self.ns_per_unit()) as u64
    }
}

/// How each event's time is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeColumn {
    None,
    /// -T: the time of day.
    Clock,
    /// -t: seconds since the first event's start.
    Relative,
}

/// One slow call, as the report needs it.
pub struct Call<'a> {
    pub comm: &'a Name,
    pub pid: u32,
    pub tid: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub retval: u64,
    pub func: &'a str,
    pub args: &'a [u64],
    pub user: Stack<Frame>,
    pub kernel: Stack<Frame>,
}

#[derive(Serialize)]
struct JsonCall<'a> {
    time: String,
    comm: &'a Name,
    pid: u32,
    tid: u32,
    func: &'a str,
    latency_ns: u64,
    retval: u64,
    #[serde(skip_serializing_if = "<[u64]>::is_empty")]
    args: &'a [u64],
    /// With -U or -K.
    #[serde(flatten)]
    stacks: Option<JsonStacks<'a>>,
}

pub struct Report {
    pub threshold: Threshold,
    pub time: TimeColumn,
    pub args: bool,
    pub folded: bool,
    pub json: bool,
    first_start: Option<u64>,
}

impl Report {
    pub fn new(threshold: Threshold, time: TimeColumn, args: bool, folded: bool, json: bool) -> Self {
        Report { threshold, time, args, folded, json, first_start: None }
    }

    /// BCC's two header lines (none with -f or --json).
    pub fn header(&self, out: &mut Output) -> Result<()> {
        if self.folded || self.json {
            return Ok(());
        }
        let t = self.threshold;
        writeln!(out, "Tracing function calls slower than {} {}... Ctrl+C to quit.", t.value, t.unit)?;
        let time = if self.time == TimeColumn::None { String::new() } else { format!("{:<10} ", "TIME") };
        let lat = format!("LAT({})", t.unit);
        let func = if self.args { "FUNC ARGS" } else { "FUNC" };
        writeln!(out, "{time}{:<14} {:<6} {lat:>7} {:>16} {func}", "COMM", "PID", "RVAL")?;
        out.flush()?;
        Ok(())
    }

    pub fn write(&mut self, out: &mut Output, call: &Call<'_>) -> Result<()> {
        if self.json {
            out.json_line(&JsonCall {
                time: clock_rfc3339(),
                comm: call.comm,
                pid: call.pid,
                tid: call.tid,
                func: call.func,
                latency_ns: call.duration_ns,
                retval: call.retval,
                args: call.args,
                stacks: collected(call).then(|| JsonStacks::of(&call.user, &call.kernel)),
            })?;
            return Ok(());
        }
        if self.folded {
            let sample = common::stacks::Sample {
                task: common::stacks::Task {
                    pid: call.pid,
                    shown_id: call.pid,
                    comm: call.comm.clone(),
                    user: call.user.clone(),
                    kernel: call.kernel.clone(),
                },
                waker: None,
                value: 1,
            };
            let style = Style { delimited: true, ..Style::default() };
            writeln!(out, "{} 1", common::stacks::folded::folded_stack(&sample, style))?;
            out.flush()?;
            return Ok(());
        }
        let time = match self.time {
            TimeColumn::None => String::new(),
            TimeColumn::Clock => format!("{:<10} ", clock_hms()),
            TimeColumn::Relative => {
                let first = *self.first_start.get_or_insert(call.start_ns);
                format!("{:<10.6} ", call.start_ns.saturating_sub(first) as f64 / 1e9)
            }
        };
        let comm = call.comm;
        let lat = call.duration_ns as f64 / self.threshold.ns_per_unit();
        let args: Vec<String> = call.args.iter().map(|a| format!("{a:#x}")).collect();
        writeln!(
            out,
            "{time}{comm:<14.14} {:<6} {lat:>7.2} {:>16x} {} {}",
            call.pid,
            call.retval,
            call.func,
            args.join(" ")
        )?;
        for stack in [&call.kernel, &call.user] {
            if let Stack::Frames(frames) = stack {
                for f in frames {
                    writeln!(out, "    {}", f.name)?;
                }
            }
        }
        out.flush()?;
        Ok(())
    }
}

/// Whether -U or -K collected a stack of the call.
fn collected(call: &Call<'_>) -> bool {
    !matches!((&call.user, &call.kernel), (Stack::Skipped, Stack::Skipped))
}
