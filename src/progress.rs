//! Progress bars on stderr for long commands (a run's steps, a batch's runs, rendered
//! images): drawn only on a terminal and never with `--quiet`, so logs and pipes stay clean.

use std::io::IsTerminal;

/// A bar over `total` items counted in `unit` ("steps", "images", "runs"), or `None` when
/// `quiet` or stderr is not a terminal. The message slot (`set_message`) follows the
/// counts: the current energy of a run, the name of a batch's run.
pub fn bar(total: u64, unit: &str, quiet: bool) -> Option<indicatif::ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let template =
        format!("{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}}) {{msg}}");
    let style = indicatif::ProgressStyle::with_template(&template)
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ");
    Some(indicatif::ProgressBar::new(total).with_style(style))
}
