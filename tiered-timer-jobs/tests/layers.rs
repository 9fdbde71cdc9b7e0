//! The crate's import graph, read from its source: the layers that
//! CONTRIBUTING.md ("Architecture of the jobs crate") draws, checked. Run with
//! `cargo test -p tiered-timer-jobs --test layers -- --nocapture` to see
//! the graph.
//!
//! Each file of `src/` is a module; an edge is a path in its code that
//! names another module of the crate (`use crate::data::id::JobId`,
//! `super::names::log_path(..)`, `use backend::EmbeddedBackend` for a
//! child). Test-only code (`#[cfg(test)]` modules and items) is left
//! out: tests may reach anywhere. The checks:
//!
//! * **layers**: a module imports only from its own top-level module or
//!   from a lower layer ([`LAYERS`], top first); two top-level modules of
//!   one layer (the backends) never import each other;
//! * **no circle**: the graph of files has no cycle;
//! * **pinned targets**: every `tracing` event names its `target:` (see
//!   `src/targets.rs`).
//!
//! The checker is plain string work on the source (no parser crate): it
//! strips comments and literals, tracks `mod name { .. }` blocks and
//! `#[cfg(test)]` items, and expands `use` trees. Its own tests below feed
//! it small crates with each kind of violation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, top first: each a list of top-level modules. The crate
/// root (`lib.rs`) declares them and re-exports the public API; it is not
/// checked.
const LAYERS: &[(&str, &[&str])] = &[
    ("the public API", &["api"]),
    ("where backends are chosen", &["backends"]),
    ("the backends", &["redis", "embedded", "postgres"]),
    ("the backend contract", &["contract"]),
    ("backend-neutral data", &["data", "metrics", "targets"]),
];

#[test]
fn the_import_graph_is_layered_without_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = Graph::read(&read_tree(&src));
    let problems = graph.problems(LAYERS);
    println!("{}", graph.describe(LAYERS));
    assert!(
        problems.is_empty(),
        "the import graph breaks the layering (CONTRIBUTING.md, \"Architecture of the jobs crate\"):\n{}",
        problems.join("\n")
    );
    // The layers name every top-level module there is.
    for module in graph.top_level() {
        assert!(
            layer_of(LAYERS, &module).is_some(),
            "src/{module} is in no layer: add it to LAYERS and to CONTRIBUTING.md"
        );
    }
}

/// Every `.rs` file under `dir`, by its path relative to it (with `/`).
fn read_tree(dir: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy();
                out.insert(
                    rel.replace('\\', "/"),
                    std::fs::read_to_string(&path).unwrap(),
                );
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

/// The module a file is (`a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs`
/// is the root, "").
fn module_of(file: &str) -> String {
    let path = file.trim_end_matches(".rs");
    let path = path.strip_suffix("/mod").unwrap_or(path);
    if path == "lib" {
        String::new()
    } else {
        path.replace('/', "::")
    }
}

fn top_of(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

fn layer_of(layers: &[(&str, &[&str])], module: &str) -> Option<usize> {
    let top = top_of(module);
    layers.iter().position(|(_, tops)| tops.contains(&top))
}

fn parent_of(module: &str) -> String {
    module
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_owned())
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else {
        format!("{base}::{name}")
    }
}

/// The crate's modules and who imports whom.
struct Graph {
    /// Every non-test module that is a file.
    modules: BTreeSet<String>,
    /// Module → the modules it names, with the file and the path that
    /// does.
    edges: BTreeMap<String, BTreeMap<String, String>>,
    /// `tracing` events without a `target:`, as `file: line`.
    untargeted: Vec<String>,
}

impl Graph {
    fn read(files: &BTreeMap<String, String>) -> Graph {
        let all: BTreeMap<String, &str> = files
            .keys()
            .map(|file| (module_of(file), file.as_str()))
            .collect();
        let mut parsed = BTreeMap::new();
        for (file, source) in files {
            parsed.insert(module_of(file), Parsed::of(source));
        }
        // Modules declared under `#[cfg(test)]`, and everything below them.
        let mut test_only: BTreeSet<String> = BTreeSet::new();
        for (module, p) in &parsed {
            for child in &p.test_children {
                test_only.insert(join(module, child));
            }
        }
        let is_test = |m: &str| {
            test_only
                .iter()
                .any(|t| m == t || m.starts_with(&format!("{t}::")))
        };
        let modules: BTreeSet<String> = all.keys().filter(|m| !is_test(m)).cloned().collect();
        // The names the crate root re-exports (`pub use crate::api::Queue`),
        // and the module each is from.
        let empty = BTreeMap::new();
        let mut root = BTreeMap::new();
        for (inline, path) in parsed.get("").map_or(&Vec::new(), |p| &p.paths) {
            if let (true, Some(name)) = (inline.is_empty(), path.last()) {
                if let Some(from) = resolve(&modules, &empty, "", path) {
                    root.insert(name.clone(), from);
                }
            }
        }
        let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let mut untargeted = Vec::new();
        for (module, file) in &all {
            if is_test(module) {
                continue;
            }
            let p = &parsed[module];
            for line in &p.untargeted {
                untargeted.push(format!("src/{file}:{line}"));
            }
            for (inline, path) in &p.paths {
                let here = if inline.is_empty() {
                    module.clone()
                } else {
                    format!("{module}::{inline}")
                };
                if let Some(to) = resolve(&modules, &root, &here, path) {
                    if &to != module && !to.is_empty() {
                        edges
                            .entry(module.clone())
                            .or_default()
                            .entry(to)
                            .or_insert_with(|| format!("src/{file}: {}", path.join("::")));
                    }
                }
            }
        }
        Graph {
            modules,
            edges,
            untargeted,
        }
    }

    fn top_level(&self) -> BTreeSet<String> {
        self.modules
            .iter()
            .filter(|m| !m.is_empty())
            .map(|m| top_of(m).to_owned())
            .collect()
    }

    /// Every violation of the layering, the circles, and the events
    /// without a target.
    fn problems(&self, layers: &[(&str, &[&str])]) -> Vec<String> {
        let mut problems = Vec::new();
        for (from, tos) in &self.edges {
            if from.is_empty() {
                continue; // the crate root
            }
            for (to, why) in tos {
                let (Some(a), Some(b)) = (layer_of(layers, from), layer_of(layers, to)) else {
                    continue;
                };
                if b < a {
                    problems.push(format!(
                        "{from} ({}) imports {to} ({}), a layer above it: {why}",
                        layers[a].0, layers[b].0
                    ));
                } else if a == b && top_of(from) != top_of(to) {
                    problems.push(format!(
                        "{from} imports {to}, beside it in {}: {why}",
                        layers[a].0
                    ));
                }
            }
        }
        for cycle in self.cycles() {
            problems.push(format!("a circle: {}", cycle.join(" -> ")));
        }
        for place in &self.untargeted {
            problems.push(format!("a tracing event without `target:` at {place}"));
        }
        problems
    }

    /// The graph's circles (one per strongly connected component of more
    /// than one module, with a path around it).
    fn cycles(&self) -> Vec<Vec<String>> {
        let nodes: Vec<&String> = self.modules.iter().filter(|m| !m.is_empty()).collect();
        let index: BTreeMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, m)| (m.as_str(), i))
            .collect();
        let next: Vec<Vec<usize>> = nodes
            .iter()
            .map(|m| {
                self.edges
                    .get(*m)
                    .into_iter()
                    .flat_map(|tos| tos.keys())
                    .filter_map(|to| index.get(to.as_str()).copied())
                    .collect()
            })
            .collect();
        let mut cycles = Vec::new();
        for component in strongly_connected(&next) {
            if component.len() < 2 {
                continue;
            }
            // A path around it: from its first module, a shortest way back.
            let start = component[0];
            let inside: BTreeSet<usize> = component.iter().copied().collect();
            let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut back = None;
            while let Some(at) = queue.pop_front() {
                for &to in &next[at] {
                    if !inside.contains(&to) {
                        continue;
                    }
                    if to == start {
                        back = Some(at);
                        queue.clear();
                        break;
                    }
                    if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(to) {
                        e.insert(at);
                        queue.push_back(to);
                    }
                }
            }
            let mut chain = Vec::new();
            let mut at = back.expect("a component of two or more has a circle");
            while at != start {
                chain.push(at);
                at = came_from[&at];
            }
            chain.reverse();
            let path: Vec<usize> = std::iter::once(start)
                .chain(chain)
                .chain(std::iter::once(start))
                .collect();
            cycles.push(path.into_iter().map(|i| nodes[i].clone()).collect());
        }
        cycles
    }

    /// The graph for people: each layer's modules, then every edge that
    /// leaves a top-level module.
    fn describe(&self, layers: &[(&str, &[&str])]) -> String {
        let mut out = String::from("The jobs crate's layers, top first:\n");
        for (name, tops) in layers {
            out.push_str(&format!("  {name}: {}\n", tops.join(", ")));
        }
        out.push_str("Imports between top-level modules:\n");
        let mut between: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (from, tos) in &self.edges {
            for to in tos.keys() {
                if top_of(from) != top_of(to) && !from.is_empty() {
                    *between
                        .entry((top_of(from).to_owned(), top_of(to).to_owned()))
                        .or_default() += 1;
                }
            }
        }
        for ((from, to), n) in between {
            out.push_str(&format!("  {from} -> {to} ({n} file(s))\n"));
        }
        out
    }
}

/// Tarjan's algorithm, iteratively: the strongly connected components.
fn strongly_connected(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = next.len();
    let (mut index, mut low) = (vec![usize::MAX; n], vec![0; n]);
    let (mut on_stack, mut stack, mut out) = (vec![false; n], Vec::new(), Vec::new());
    let mut counter = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if *i == 0 {
                index[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = next[v].get(*i) {
                *i += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                loop {
                    let w = stack.pop().unwrap();
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                component.reverse();
                out.push(component);
            }
        }
    }
    out
}

/// The module a path names from module `here`: the longest prefix that is
/// a module (`None` for another crate's path).
fn resolve(
    modules: &BTreeSet<String>,
    root: &BTreeMap<String, String>,
    here: &str,
    path: &[String],
) -> Option<String> {
    let (mut base, rest) = match path.first()?.as_str() {
        "crate" => (String::new(), &path[1..]),
        "self" => (here.to_owned(), &path[1..]),
        "super" => {
            let mut base = here.to_owned();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base = parent_of(&base);
                rest = &rest[1..];
            }
            (base, rest)
        }
        // A child module named without `self::` (2018 edition).
        child if modules.contains(&join(here, child)) => (here.to_owned(), path),
        _ => return None,
    };
    // `here` may be an inline module of a file: step out to the file.
    while !base.is_empty() && !modules.contains(&base) {
        base = parent_of(&base);
    }
    for (i, segment) in rest.iter().enumerate() {
        let deeper = join(&base, segment);
        if modules.contains(&deeper) {
            base = deeper;
        } else {
            // A name the crate root re-exports stands for where it is from.
            if i == 0 && base.is_empty() {
                if let Some(from) = root.get(segment) {
                    return Some(from.clone());
                }
            }
            break;
        }
    }
    Some(base)
}

/// What one file says, read from its source.
#[derive(Default)]
struct Parsed {
    /// Paths into the crate (`crate::..`, `super::..`, `self::..`, and
    /// `use child::..`), each with the inline module it is in (`a::b`
    /// inside `mod a { mod b { .. } }`; "" at the file's top).
    paths: Vec<(String, Vec<String>)>,
    /// Child modules declared under `#[cfg(test)]`.
    test_children: Vec<String>,
    /// Lines of `tracing` events that name no target.
    untargeted: Vec<usize>,
}

impl Parsed {
    fn of(source: &str) -> Parsed {
        let code = strip(source);
        let tokens = tokenize(&code);
        let mut out = Parsed::default();
        let mut inline: Vec<(String, usize)> = Vec::new(); // (name, depth)
        let mut depth = 0usize;
        let mut test_attr = false;
        let mut i = 0;
        while i < tokens.len() {
            let (t, line) = (&tokens[i].0, tokens[i].1);
            match t.as_str() {
                "#" if is_cfg_test(&tokens, i) => {
                    test_attr = true;
                    i = skip_attribute(&tokens, i);
                    continue;
                }
                "#" => {
                    i = skip_attribute(&tokens, i);
                    continue;
                }
                _ if test_attr => {
                    // The item the attribute is on: a test module's name, or
                    // anything to skip whole.
                    test_attr = false;
                    let j = skip_visibility(&tokens, i);
                    if tokens.get(j).is_some_and(|t| t.0 == "mod")
                        && tokens.get(j + 2).is_some_and(|t| t.0 == ";")
                    {
                        out.test_children.push(tokens[j + 1].0.clone());
                    }
                    i = skip_item(&tokens, i);
                    continue;
                }
                "{" => depth += 1,
                "}" => {
                    depth = depth.saturating_sub(1);
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                }
                "mod" if tokens.get(i + 2).is_some_and(|t| t.0 == "{") => {
                    inline.push((tokens[i + 1].0.clone(), depth));
                }
                "use" => {
                    let end = (i..tokens.len())
                        .find(|&j| tokens[j].0 == ";")
                        .unwrap_or(tokens.len());
                    let tree: Vec<String> =
                        tokens[i + 1..end].iter().map(|t| t.0.clone()).collect();
                    let here = inline
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join("::");
                    for path in expand_use(&tree) {
                        out.paths.push((here.clone(), path));
                    }
                    i = end;
                    continue;
                }
                "crate" | "super" | "self" if tokens.get(i + 1).is_some_and(|t| t.0 == "::") => {
                    let mut path = vec![t.clone()];
                    let mut j = i + 1;
                    while tokens.get(j).is_some_and(|t| t.0 == "::")
                        && tokens.get(j + 1).is_some_and(|t| is_ident(&t.0))
                    {
                        path.push(tokens[j + 1].0.clone());
                        j += 2;
                    }
                    let here = inline
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join("::");
                    out.paths.push((here, path));
                    i = j;
                    continue;
                }
                // tracing :: level ! ( target :
                "tracing"
                    if is_event(&tokens, i)
                        && tokens.get(i + 5).is_none_or(|t| t.0 != "target") =>
                {
                    out.untargeted.push(line);
                }
                _ => {}
            }
            i += 1;
        }
        out
    }
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn is_event(tokens: &[(String, usize)], i: usize) -> bool {
    let at = |k: usize| tokens.get(i + k).map_or("", |t| t.0.as_str());
    at(1) == "::"
        && matches!(
            at(2),
            "trace" | "debug" | "info" | "warn" | "error" | "event"
        )
        && at(3) == "!"
        && at(4) == "("
}

/// `#[cfg(test)]` or `#[cfg(all(test, ..))]` at `i`.
fn is_cfg_test(tokens: &[(String, usize)], i: usize) -> bool {
    let end = skip_attribute(tokens, i);
    let inner: Vec<&str> = tokens[i..end].iter().map(|t| t.0.as_str()).collect();
    inner.get(2) == Some(&"cfg")
        && (inner.get(4) == Some(&"test")
            || (inner.get(4) == Some(&"all") && inner.get(6) == Some(&"test")))
}

/// The index after the attribute at `i` (`#[..]` or `#![..]`).
fn skip_attribute(tokens: &[(String, usize)], i: usize) -> usize {
    let mut j = i + 1;
    if tokens.get(j).is_some_and(|t| t.0 == "!") {
        j += 1;
    }
    skip_group(tokens, j)
}

/// The index after the balanced group opening at `i`.
fn skip_group(tokens: &[(String, usize)], i: usize) -> usize {
    let mut depth = 0;
    for (j, (t, _)) in tokens.iter().enumerate().skip(i) {
        match t.as_str() {
            "[" | "(" | "{" => depth += 1,
            "]" | ")" | "}" => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

fn skip_visibility(tokens: &[(String, usize)], mut i: usize) -> usize {
    while tokens.get(i).is_some_and(|t| t.0 == "#") {
        i = skip_attribute(tokens, i);
    }
    if tokens.get(i).is_some_and(|t| t.0 == "pub") {
        i += 1;
        if tokens.get(i).is_some_and(|t| t.0 == "(") {
            i = skip_group(tokens, i);
        }
    }
    i
}

/// The index after the item at `i`: up to its `;`, or its first
/// top-level `{ .. }` block.
fn skip_item(tokens: &[(String, usize)], i: usize) -> usize {
    let mut j = skip_visibility(tokens, i);
    while j < tokens.len() {
        match tokens[j].0.as_str() {
            ";" => return j + 1,
            "{" => return skip_group(tokens, j),
            "(" | "[" => j = skip_group(tokens, j),
            _ => j += 1,
        }
    }
    j
}

/// The paths a `use` tree names (`a::{b, c::{d, e}}` → `a::b`, `a::c::d`,
/// `a::c::e`); `self` in a group names its prefix, `*` and `as` are
/// dropped.
fn expand_use(tree: &[String]) -> Vec<Vec<String>> {
    fn walk(tree: &[String], prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        let mut i = 0;
        while i < tree.len() {
            match tree[i].as_str() {
                "::" => i += 1,
                "{" => {
                    // Split the group's members at top-level commas.
                    let end = {
                        let mut depth = 0;
                        let mut j = i;
                        loop {
                            match tree[j].as_str() {
                                "{" => depth += 1,
                                "}" => {
                                    depth -= 1;
                                    if depth == 0 {
                                        break j;
                                    }
                                }
                                _ => {}
                            }
                            j += 1;
                        }
                    };
                    let mut start = i + 1;
                    let mut depth = 0;
                    for j in i + 1..=end {
                        match tree[j].as_str() {
                            "{" => depth += 1,
                            "}" if depth > 0 => depth -= 1,
                            "," | "}" if depth == 0 => {
                                if start < j {
                                    walk(&tree[start..j], path.clone(), out);
                                }
                                start = j + 1;
                            }
                            _ => {}
                        }
                    }
                    return;
                }
                "as" => break,
                "*" => break,
                "self" if !path.is_empty() => i += 1,
                t => {
                    path.push(t.to_owned());
                    i += 1;
                }
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
    let mut out = Vec::new();
    walk(tree, Vec::new(), &mut out);
    out
}

/// The source without comments, strings and chars (kept as `""` and
/// `' '`), lines kept.
fn strip(source: &str) -> String {
    let b: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string: r"..", r#".."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                if b[j] == '\n' {
                    out.push('\n');
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if b.get(i) == Some(&'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            out.push_str("\"\"");
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime.
            let close = if next == Some('\\') {
                (i + 2..b.len().min(i + 12)).find(|&j| b[j] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.push_str("' '");
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Identifiers, `::`, and single punctuation, with their line.
fn tokenize(code: &str) -> Vec<(String, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((chars[start..i].iter().collect(), line));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(("::".to_owned(), line));
            i += 2;
        } else {
            out.push((c.to_string(), line));
            i += 1;
        }
    }
    out
}

// The checker's own tests: each kind of violation, in a small crate.

fn crate_of(files: &[(&str, &str)]) -> Graph {
    let files = files
        .iter()
        .map(|(f, s)| ((*f).to_owned(), (*s).to_owned()))
        .collect();
    Graph::read(&files)
}

const TOY_LAYERS: &[(&str, &[&str])] = &[
    ("top", &["api"]),
    ("backends", &["red", "blue"]),
    ("bottom", &["data"]),
];

#[test]
fn a_layered_crate_passes() {
    let graph = crate_of(&[
        (
            "lib.rs",
            "mod api; mod red; mod blue; mod data; pub use api::Q;",
        ),
        ("api/mod.rs", "mod q; pub use q::Q;"),
        (
            "api/q.rs",
            "use crate::red::R; use crate::data::{id::Id, Err as E};\nstruct Q;",
        ),
        ("red/mod.rs", "mod r; pub(crate) use r::R;"),
        (
            "red/r.rs",
            "use super::super::data::id::Id;\nfn f() { tracing::warn!(target: T, \"x\"); }",
        ),
        ("blue.rs", "use crate::data::*;"),
        ("data/mod.rs", "pub(crate) mod id; pub(crate) struct Err;"),
        (
            "data/id.rs",
            "pub struct Id; #[cfg(test)] mod tests { use crate::api::q; }",
        ),
    ]);
    assert_eq!(graph.problems(TOY_LAYERS), Vec::<String>::new());
    // `crate::red::R` is the re-export in `red/mod.rs`.
    assert!(
        graph.edges["api::q"].contains_key("red"),
        "{:?}",
        graph.edges
    );
    assert!(graph.edges["red"].contains_key("red::r"));
    assert!(graph.edges["api::q"].contains_key("data::id"));
    assert!(graph.edges["api::q"].contains_key("data"));
    assert!(graph.edges["red::r"].contains_key("data::id"));
}

#[test]
fn an_import_that_runs_back_up_is_found() {
    let graph = crate_of(&[
        ("lib.rs", "mod api; mod data;"),
        ("api.rs", "use crate::data::Id;"),
        (
            "data.rs",
            "// use crate::api::Q; is a comment\nfn f() -> crate::api::Q { todo!() }",
        ),
    ]);
    let problems = graph.problems(TOY_LAYERS);
    assert_eq!(problems.len(), 2, "{problems:?}"); // the import, and the circle
    assert!(
        problems[0].starts_with("data (bottom) imports api (top)"),
        "{problems:?}"
    );
    assert!(problems[1].starts_with("a circle: "), "{problems:?}");
}

#[test]
fn an_import_through_the_crate_roots_re_export_is_followed() {
    let graph = crate_of(&[
        ("lib.rs", "mod api; mod data; pub use crate::api::Queue;"),
        ("api.rs", "pub struct Queue; use crate::data::Id;"),
        ("data.rs", "pub struct Id; fn f(_: &crate::Queue) {}"),
    ]);
    let problems = graph.problems(TOY_LAYERS);
    assert!(
        problems[0].starts_with("data (bottom) imports api (top)"),
        "{problems:?}"
    );
}

#[test]
fn backends_that_import_each_other_are_found() {
    let graph = crate_of(&[
        ("lib.rs", "mod red; mod blue;"),
        ("red.rs", "pub struct R;"),
        ("blue.rs", "use crate::red::R;"),
    ]);
    let problems = graph.problems(TOY_LAYERS);
    assert_eq!(
        problems,
        vec!["blue imports red, beside it in backends: src/blue.rs: crate::red::R"]
    );
}

#[test]
fn a_circle_within_a_folder_is_found_but_not_a_test_modules() {
    let graph = crate_of(&[
        ("lib.rs", "mod red;"),
        ("red/mod.rs", "mod a; mod b; #[cfg(test)] mod tests;"),
        ("red/a.rs", "use super::b::B; pub struct A;\n#[cfg(test)]\nmod tests { use super::*; use crate::red::tests::T; }"),
        ("red/b.rs", "pub struct B; fn f(_: super::a::A) {}"),
        ("red/tests.rs", "use super::a::A; use super::b::B; pub struct T;"),
    ]);
    let problems = graph.problems(TOY_LAYERS);
    assert_eq!(problems, vec!["a circle: red::a -> red::b -> red::a"]);
}

#[test]
fn an_event_without_a_target_is_found() {
    let graph = crate_of(&[
        ("lib.rs", "mod data;"),
        (
            "data.rs",
            "fn f() {\n    tracing::warn!(target: T, \"pinned\");\n    tracing::info!(\n        job = %id, \"not pinned\"\n    );\n}",
        ),
    ]);
    assert_eq!(
        graph.problems(TOY_LAYERS),
        vec!["a tracing event without `target:` at src/data.rs:3"]
    );
}

#[test]
fn use_trees_are_expanded() {
    let tree = |s: &str| tokenize(s).into_iter().map(|t| t.0).collect::<Vec<_>>();
    let paths: Vec<String> = expand_use(&tree("crate::{a::{self, B}, c::D as E, f::*}"))
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        ["crate::a", "crate::a::B", "crate::c::D", "crate::f"]
    );
}
