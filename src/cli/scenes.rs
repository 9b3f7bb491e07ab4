//! `msc scenes`: the built-in scenes.

/// Prints one line per built-in scene: its name and what it shows.
pub fn execute() {
    let scenes = crate::scene::builtin_names();
    let width = scenes.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, description) in scenes {
        println!("{name:width$}  {description}");
    }
}
