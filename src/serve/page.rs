//! The page: one HTML file with its style and script put in at build
//! time (`include_str!`), so the binary serves it whole and the browser
//! loads nothing from anywhere else.

const HTML: &str = include_str!("page/page.html");
const CSS: &str = include_str!("page/page.css");
const JS: &str = include_str!("page/page.js");

/// The page, style and script inside.
pub(super) fn html() -> String {
    HTML.replacen("/*CSS*/", CSS, 1).replacen("/*JS*/", JS, 1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_is_whole_and_loads_nothing_from_elsewhere() {
        let page = super::html();
        assert!(!page.contains("/*CSS*/") && !page.contains("/*JS*/"));
        for external in [
            "src=\"http",
            "href=\"http",
            "@import",
            "url(",
            "<link",
            "<script src",
        ] {
            assert!(!page.contains(external), "the page loads {external}");
        }
    }
}
