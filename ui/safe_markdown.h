// Text from outside the app (model output, imported sessions) shown as Markdown safely: raw HTML
// in it is shown as the characters typed, never interpreted (no <img>, <a>, <style>, tables of
// someone else's making); Markdown images become their address in words (no file is read to show
// them); and a link opens only after the user has seen its full address and agreed, and only
// for web and mail addresses (a file: or other link could start a program through the desktop).
#pragma once

#include <QString>

class QLabel;
class QWidget;

namespace flashdesk::ui {

// GitHub-flavoured Markdown without raw HTML, as the rich text a QLabel shows.
QString safe_markdown_html(const QString& markdown);

// Shows `markdown` in `label` (safe_markdown_html) with links that ask first (ask_to_open_link).
void set_safe_markdown(QLabel* label, const QString& markdown);

// Whether FlashDesk offers to open `url`: http, https and mailto only.
bool is_openable_link(const QString& url);

// Asks, naming the whole address, and opens `url` with the desktop's browser or mail program
// when the user agrees; an address of another kind is refused in words. Returns whether it was
// handed to the desktop.
bool ask_to_open_link(QWidget* parent, const QString& url);

}  // namespace flashdesk::ui
