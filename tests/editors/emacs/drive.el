;;; drive.el --- Emacs 28 + eglot 1.9 driver for tests/editors/emacs/test_emacs.py  -*- lexical-binding: t -*-

;; Run as `emacs -Q --batch -l drive.el' with DSH_EDITOR_SPEC naming a JSON file:
;;   config        the user's configuration: the eglot block of docs/editors.md, pointed at
;;                 the test's server and sample store
;;   file          the prompt file to visit
;;   result        where to write the JSON result
;;   pick          which completion to choose in *Completions* (1-based)
;;   timeout_ms    hard limit for the whole run
;;   queries       what to type after `@' before completing, one run each
;;   symbol_query  what to ask `workspace/symbol' for (what `xref-find-apropos' lists)
;; What a user does is typed as keys through `execute-kbd-macro' (which also feeds the minibuffer in batch):
;; `M-x eglot', `@', `M-x completion-at-point', choosing in *Completions*,
;; `M-x eglot-code-actions', the preview key `C-c d p' and `M-x dsh-open-transcript'.

(require 'package)
(setq package-directory-list '("/usr/share/emacs/site-lisp/elpa"))
(package-initialize)
(require 'json)
(require 'cl-lib)

(defvar dsh-spec
  (let ((json-object-type 'alist) (json-array-type 'list) (json-key-type 'symbol))
    (json-read-file (getenv "DSH_EDITOR_SPEC"))))
(defun dsh-spec (key) (alist-get key dsh-spec))

(defvar dsh-result (list (cons 'messages nil)))
(defvar dsh-step "start")
(defvar dsh-finished nil)

(defun dsh-record (key value)
  (setf (alist-get key dsh-result) value))

(defun dsh-server-log ()
  "The server's stderr and, after a failure, the tail of the JSON-RPC events."
  (let ((server (ignore-errors (with-current-buffer (get-file-buffer (dsh-spec 'file))
                                 (eglot-current-server)))))
    (when server
      (concat
       (let ((stderr (process-get (jsonrpc--process server) 'jsonrpc-stderr)))
         (if (buffer-live-p stderr) (with-current-buffer stderr (buffer-string)) ""))
       "\n--- events ---\n"
       (with-current-buffer (jsonrpc-events-buffer server)
         (buffer-substring-no-properties (max (point-min) (- (point-max) 6000)) (point-max)))))))

(defun dsh-finish (error-text)
  "Write the result file and leave Emacs (status 2 on failure)."
  (unless dsh-finished
    (setq dsh-finished t)
    (unless (alist-get 'server_log dsh-result)
      (dsh-record 'server_log (or (ignore-errors (dsh-server-log)) "")))
    (dsh-record 'error error-text)
    (dsh-record 'last_step dsh-step)
    (dsh-record 'messages (reverse (alist-get 'messages dsh-result)))
    (with-temp-file (dsh-spec 'result)
      (let ((json-encoding-pretty-print nil))
        (insert (json-encode dsh-result))))
    (kill-emacs (if error-text 2 0))))

;; Hard limit: timers run while Emacs waits for the server, so a hung server fails the run.
(run-with-timer (/ (dsh-spec 'timeout_ms) 1000.0) nil
                (lambda () (dsh-finish (format "timeout while waiting for: %s" dsh-step))))

(defun dsh-wait (step predicate &optional seconds)
  "Let the editor sit idle until PREDICATE returns non-nil; return that value.
Batch Emacs never counts as idle, so the idle timers that eglot (didChange) and
flymake (a check after an edit) rely on are run here once their idle delay has passed,
as they would be for a person waiting at the keyboard."
  (setq dsh-step step)
  (let* ((idle-since (float-time))
         (deadline (+ idle-since (or seconds 10)))
         fired value)
    (while (and (not (setq value (funcall predicate)))
                (< (float-time) deadline))
      (accept-process-output nil 0.03)
      (dolist (timer (copy-sequence timer-idle-list))
        (when (and (memq timer timer-idle-list)
                   (not (memq timer fired))
                   (>= (- (float-time) idle-since) (float-time (timer--time timer))))
          (push timer fired)
          (timer-event-handler timer))))
    (or value (dsh-finish (format "gave up waiting for: %s" step)))))

(defun dsh-keys (keys)
  (execute-kbd-macro (kbd keys)))

;; ---- the user's configuration, as documented ----

(load (dsh-spec 'config) nil t t)
(require 'eglot)
;; One candidate per line in *Completions*, so the order read back is the order shown.
(setq completions-format 'one-column)

(advice-add 'dsh-session-reference-preview :filter-return
            (lambda (preview) (dsh-record 'preview preview) preview))

(cl-defmethod eglot-handle-notification :before
  (_server (_method (eql window/showMessage)) &key type message)
  (push `((type . ,type) (message . ,message)) (alist-get 'messages dsh-result)))

;; ---- the scripted session ----

(defun dsh-diagnostics ()
  (mapcar (lambda (diag)
            (let ((lsp (cdr (assoc 'eglot-lsp-diag (flymake-diagnostic-data diag)))))
              `((beg . ,(flymake-diagnostic-beg diag))
                (end . ,(flymake-diagnostic-end diag))
                (line . ,(line-number-at-pos (flymake-diagnostic-beg diag)))
                (type . ,(symbol-name (flymake-diagnostic-type diag)))
                (text . ,(flymake-diagnostic-text diag))
                (code . ,(plist-get lsp :code))
                (source . ,(plist-get lsp :source))
                (severity . ,(plist-get lsp :severity)))))
          (flymake-diagnostics)))

(defun dsh-errors ()
  (cl-remove-if-not (lambda (diag) (eq (flymake-diagnostic-type diag) 'eglot-error))
                    (flymake-diagnostics)))

(defun dsh-lines ()
  (split-string (buffer-substring-no-properties (point-min) (point-max)) "\n"))

(defun dsh-current-line ()
  (buffer-substring-no-properties (line-beginning-position) (line-end-position)))

(defun dsh-completions-shown ()
  "The candidates *Completions* lists, top to bottom."
  (let ((buffer (get-buffer "*Completions*")) shown)
    (when (and buffer (get-buffer-window buffer))
      (with-current-buffer buffer
        (goto-char (point-min))
        (next-completion 1)
        (while (and (not (eobp)) (get-text-property (point) 'mouse-face))
          (let ((end (next-single-property-change (point) 'mouse-face nil (point-max))))
            (push (buffer-substring-no-properties (point) end) shown)
            (goto-char end)
            (next-completion 1)
            (when (<= (point) end) (goto-char (point-max)))))))
    (nreverse shown)))

(defun dsh-run ()
  (let ((prompt (find-file (dsh-spec 'file))))
    (dsh-record 'lines_at_open (dsh-lines))
    (dsh-keys "M-x eglot RET")
    (dsh-wait "eglot to manage the prompt" (lambda () (bound-and-true-p eglot--managed-mode)))
    (dsh-record 'server_name (jsonrpc-name (eglot-current-server)))

    ;; 1. The noncanonical URI in the visited file is flagged.  (Flymake defers its first check
    ;; to the command loop, which batch Emacs does not run: start it as that loop would.)
    (flymake-start)
    (dsh-wait "an error diagnostic on open" #'dsh-errors)
    (dsh-record 'open `((diagnostics . ,(dsh-diagnostics))))

    ;; 2. Type `@' at the end of the last line and complete.
    (goto-char (point-max))
    (skip-chars-backward "\n")
    (dsh-keys "SPC @ M-x completion-at-point RET")
    (let ((shown (dsh-wait "the *Completions* list after @" #'dsh-completions-shown)))
      (dsh-record 'complete `((shown . ,shown) (line . ,(dsh-current-line)))))

    ;; 3. Choose the pick-th candidate in *Completions*.
    (dsh-keys (concat "M-x switch-to-completions RET"
                      (apply #'concat (make-list (1- (dsh-spec 'pick)) " <right>"))
                      " RET"))
    (set-buffer prompt)
    (dsh-wait "the accepted mention" (lambda () (string-match-p "dsh-session:" (dsh-current-line))))
    (dsh-record 'accept `((line . ,(dsh-current-line))
                          (lnum . ,(1- (line-number-at-pos)))))

    ;; 4. Point on the flagged URI, then the code action menu; RET takes the preferred fix.
    (let* ((bad (car (dsh-errors)))
           (line (line-number-at-pos (flymake-diagnostic-beg bad)))
           (before (progn (goto-char (flymake-diagnostic-beg bad)) (dsh-current-line)))
           (tick (buffer-chars-modified-tick)))
      (goto-char (+ 2 (flymake-diagnostic-beg bad)))
      (dsh-keys "M-x eglot-code-actions RET RET")
      (dsh-wait "the quick fix edit and the diagnostic to clear"
                (lambda ()
                  (and (> (buffer-chars-modified-tick) tick)
                       (null (dsh-errors)))))
      (goto-char (point-min))
      (forward-line (1- line))
      (dsh-record 'fix `((line_before . ,before)
                         (line_after . ,(dsh-current-line))
                         (diagnostics . ,(dsh-diagnostics)))))

    ;; 5. The preview key.
    (dsh-keys "C-c d p")
    (dsh-wait "the preview buffer" (lambda () (get-buffer "*dsh preview*")))
    (dsh-record 'preview_buffer (with-current-buffer "*dsh preview*" (dsh-lines)))
    (dsh-wait "the preview's showMessage" (lambda () (alist-get 'messages dsh-result)))
    ;; 6. A query typed after `@', then completion-at-point: the rows *Completions* lists.
    (with-current-buffer prompt
      (let (typed)
        (dolist (query (append (dsh-spec 'queries) nil))
          (when (get-buffer "*Completions*") (kill-buffer "*Completions*"))
          (goto-char (point-max))
          (skip-chars-backward "\n")
          (let ((start (point)))
            (dsh-keys "SPC @")
            (insert query)
            (dsh-keys "M-x completion-at-point RET")
            (let ((shown (dsh-wait (format "the *Completions* list after @%s" query)
                                   #'dsh-completions-shown)))
              (push `((query . ,query) (line . ,(dsh-current-line)) (shown . ,shown)) typed))
            (delete-region start (point))))
        (dsh-record 'typed (nreverse typed))))
    ;; 7. Issue 19: `M-x dsh-open-transcript' on the mention completion inserted; sessions as
    ;; workspace symbols (what `xref-find-apropos' lists); inlay hints where eglot has them.
    (with-current-buffer prompt
      (goto-char (point-max))
      (search-backward "@[")
      (forward-char 3)
      (dsh-keys "M-x dsh-open-transcript RET")
      (let ((shown (dsh-wait "the transcript buffer"
                             (lambda ()
                               (cl-find-if (lambda (buffer)
                                             (string-prefix-p "*dsh transcript: " (buffer-name buffer)))
                                           (buffer-list))))))
        (with-current-buffer shown
          (dsh-record 'transcript `((name . ,(buffer-name))
                                    (text . ,(buffer-substring-no-properties (point-min) (point-max)))
                                    (read_only . ,(if buffer-read-only t :json-false)))))))
    (with-current-buffer prompt
      (dsh-record 'symbols (mapcar #'xref-item-summary
                                   (xref-backend-apropos 'eglot (dsh-spec 'symbol_query))))
      (dsh-record 'inlay_supported (if (fboundp 'eglot-inlay-hints-mode) t :json-false))
      (when (fboundp 'eglot-inlay-hints-mode)
        (eglot-inlay-hints-mode 1)
        (let ((hints (dsh-wait "the inlay hints"
                               (lambda ()
                                 (cl-loop for overlay in (overlays-in (point-min) (point-max))
                                          when (overlay-get overlay 'eglot--inlay-hint)
                                          collect (substring-no-properties
                                                   (or (overlay-get overlay 'before-string)
                                                       (overlay-get overlay 'after-string) "")))))))
          (dsh-record 'hints hints))))
    (with-current-buffer prompt
      (dsh-record 'lines_at_end (dsh-lines))
      (dsh-record 'server_log (dsh-server-log))
      (eglot-shutdown (eglot-current-server)))
    (dsh-finish nil)))

;; drive_send.el loads this file for its helpers and runs a session of its own.
(defvar dsh-driver #'dsh-run)
(condition-case err
    (funcall dsh-driver)
  (error (dsh-finish (format "lisp error in %s: %S" dsh-step err))))
