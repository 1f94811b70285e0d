#ifndef MH_HTML_H
#define MH_HTML_H
/*
 * HTML escaping for text and quoted attribute values: &, <, >, " and ' become
 * entities (&amp; &lt; &gt; &quot; &#39;), every other byte is copied, so
 * UTF-8 passes through unchanged. Not for other contexts (inside <script>,
 * an unquoted attribute, a URL): those need their own encoding.
 */
#include <stddef.h>

/* The length of s once escaped; equal to len when nothing needs escaping. */
size_t mh_html_escaped_len(const char *s, size_t len);

/* Writes the escaped s into out, which holds mh_html_escaped_len(s, len) bytes. */
void mh_html_escape(const char *s, size_t len, char *out);

#endif
