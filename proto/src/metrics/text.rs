//! The Prometheus text exposition format, version 0.0.4: `# HELP` and
//! `# TYPE` lines, then one line per sample, label values escaped (`\\`,
//! `\"`, `\n`), histograms as cumulative `_bucket{le=...}` lines with
//! `_sum` and `_count`.

use std::fmt::Write as _;

use super::Histogram;

/// An exposition being written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// Nothing written yet.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Starts a family: its `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', r"\\").replace('\n', r"\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample of the family just started.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
    }

    /// A family of one unlabelled sample.
    pub fn single(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// A whole histogram family.
    pub fn histogram(&mut self, name: &str, help: &str, h: &Histogram) {
        self.family(name, "histogram", help);
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (i, count) in h.counts.iter().enumerate() {
            cumulative += count;
            let le = h.bounds.get(i).map_or("+Inf".to_owned(), |b| number(*b));
            self.sample(&bucket, &[("le", &le)], cumulative as f64);
        }
        self.sample(&format!("{name}_sum"), &[], h.sum_us as f64 / 1e6);
        self.sample(&format!("{name}_count"), &[], h.count() as f64);
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing is written yet.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// The text.
    pub fn finish(self) -> String {
        self.out
    }
}

/// A label value as the format writes it.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str(r"\n"),
            c => out.push(c),
        }
    }
    out
}

/// A sample value: integers without a fraction, `+Inf`, `NaN`.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslashes_quotes_and_newlines() {
        let mut e = Exposition::new();
        e.family("x_total", "counter", "a \\ help\nline");
        e.sample("x_total", &[("object", "a\\b\"c\nd")], 3.0);
        assert_eq!(
            e.finish(),
            "# HELP x_total a \\\\ help\\nline\n# TYPE x_total counter\nx_total{object=\"a\\\\b\\\"c\\nd\"} 3\n"
        );
    }

    #[test]
    fn a_histogram_has_cumulative_buckets_a_sum_and_a_count() {
        let mut h = Histogram::new(&[0.5, 1.0]);
        h.observe(std::time::Duration::from_millis(250));
        h.observe(std::time::Duration::from_secs(2));
        let mut e = Exposition::new();
        e.histogram("w_seconds", "w", &h);
        let text = e.finish();
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            samples,
            [
                "w_seconds_bucket{le=\"0.5\"} 1",
                "w_seconds_bucket{le=\"1\"} 1",
                "w_seconds_bucket{le=\"+Inf\"} 2",
                "w_seconds_sum 2.25",
                "w_seconds_count 2",
            ]
        );
    }
}
